"""The stack's GPU pools: each checked by the same catalog rules GpuNodePool runs on its args
(gpu_pool_rules.py); what spans pools (unique names, the system pool's names) is checked here."""

from __future__ import annotations

from .config_common import NAMESPACE, cut
from .config_schema import ClusterConfig, RuleBase
from .gpu_pool import GpuPool
from .gpu_pool_rules import GpuPoolRules


class PoolRules(RuleBase):
    def pool_rules(self, cluster: ClusterConfig) -> GpuPoolRules:
        """The catalog rules for one pool of this stack: the same rules GpuNodePool runs on its args,
        with the stack file's camelCase keys."""
        return GpuPoolRules(
            self.catalog,
            autopilot=cluster.autopilot,
            region=self.region,
            region_known=self.region_ok,
            cluster_location=cluster.location,
            release_channel=self.config.cluster.release_channel,
            camel_keys=True,
        )

    def _pools(self, cluster: ClusterConfig) -> tuple[GpuPool, ...]:
        pools_config = self.config.gpu_pools
        if cluster.mode == "existing":
            if pools_config:
                self.problems.add(
                    f"{NAMESPACE}:gpuPools",
                    "not allowed with cluster.mode existing: node pools of an existing cluster are "
                    "not managed here (use gpuNodes and devicePlugin for a generic cluster)",
                )
            return ()
        seen: dict[str, int] = {}
        resolved: list[GpuPool] = []
        for i, pool in self.indexed_pools():
            path = f"{NAMESPACE}:gpuPools[{i}]"
            if pool.name in seen:
                self.problems.add(
                    f"{path}.name",
                    f"{cut(pool.name)} is already used by gpuPools[{seen[pool.name]}]; pool names must "
                    "be unique",
                )
            seen.setdefault(pool.name, i)
            rules = self.pool_rules(cluster)
            result = rules.check(pool, path)
            self.problems.items += rules.problems.items
            self.warnings += rules.warnings
            if result is not None:
                resolved.append(result)
            else:
                self.broken.pools.add(pool.name)
        if cluster.mode == "standard" and cluster.system_pool:
            reserved = {"system", "default-pool"}
            for i, pool in self.indexed_pools():
                if pool.name in reserved:
                    self.problems.add(
                        f"{NAMESPACE}:gpuPools[{i}].name",
                        f"{cut(pool.name)} is reserved for the system pool; choose another name",
                    )
        return tuple(resolved)
