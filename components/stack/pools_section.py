"""The stack's GPU pools: each checked by the same catalog rules GpuNodePool runs on its args
(gpu/rules.py); what spans pools (unique names, the system pool's names) is checked here."""

from __future__ import annotations

from ..cluster.model import ClusterConfig
from ..core.common import cut
from ..dra.claims import NO_INSTALLER_ACCELERATORS, is_rack
from ..gpu.pool import GpuPool
from ..gpu.rules import GpuPoolRules
from ..gpudirect.flavors import DEFAULT_GPUDIRECT_CIDR, FLAVORS, gpudirect_range_problems
from ..network.model import NetworkConfig
from .schema import RuleBase


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
            cluster_version=self.config.cluster.minimum_version,
            version_key=f"{self.root}cluster.minimumVersion",
        )

    def _pools(self, cluster: ClusterConfig) -> tuple[GpuPool, ...]:
        pools_config = self.config.gpu_pools
        if cluster.mode == "existing":
            if pools_config:
                self.problems.add(
                    f"{self.root}gpuPools",
                    "not allowed with cluster.mode existing: node pools of an existing cluster are "
                    "not managed here (use gpuNodes and devicePlugin for a generic cluster)",
                )
            return ()
        seen: dict[str, int] = {}
        resolved: list[GpuPool] = []
        for i, pool in self.indexed_pools():
            path = f"{self.root}gpuPools[{i}]"
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
        self._one_dra_driver(resolved)
        self._no_driver_installer(resolved)
        if cluster.mode == "standard" and cluster.system_pool:
            reserved = {"system", "default-pool"}
            for i, pool in self.indexed_pools():
                if pool.name in reserved:
                    self.problems.add(
                        f"{self.root}gpuPools[{i}].name",
                        f"{cut(pool.name)} is reserved for the system pool; choose another name",
                    )
        return tuple(resolved)

    def _one_dra_driver(self, pools: list[GpuPool]) -> None:
        """The cluster's one DRA driver allocates GPUs on every node its kubelet plugin runs on, and
        must not where GKE's device plugin does: a rack pool beside a DRA-GPU pool takes DRA GPUs too."""
        if not any(p.dra_gpus for p in pools):
            return
        for i, pool in self.indexed_pools():
            if pool.name in self.broken.pools or pool.dra_gpus or not is_rack(pool.accelerator):
                continue
            self.problems.add(
                f"{self.root}gpuPools[{i}].draGpus",
                f"required on {cut(pool.name)} ({pool.accelerator}) beside a pool with draGpus: the "
                "cluster's one DRA driver, which the rack's ComputeDomains need, then allocates GPUs on "
                "every node it runs on, and must not share a node with GKE's device plugin",
            )

    def _no_driver_installer(self, pools: list[GpuPool]) -> None:
        """A DRA pool's driver comes from Google's installer DaemonSet (dra/driver_installer.py), which
        Google publishes for no GB300 node: the user installs it there."""
        resolved = {p.name: p for p in pools}
        for i, written in self.indexed_pools():
            pool = resolved.get(written.name)
            if pool is None or not pool.dra_gpus or pool.accelerator not in NO_INSTALLER_ACCELERATORS:
                continue
            self.warnings.append(
                f"{self.root}gpuPools[{i}].draGpus: {cut(pool.name)} ({pool.accelerator}) gets no NVIDIA "
                "driver: GKE installs none on a DRA pool, and Google publishes no driver installer "
                "DaemonSet for GB300; install the driver on its nodes yourself before its Pods claim GPUs"
            )

    def _gpudirect(self, network: NetworkConfig, pools: tuple[GpuPool, ...]) -> NetworkConfig:
        """The GPUDirect range (one per stack, every flavour's subnets in it) clear of the cluster's
        ranges, and one zone for every RDMA pool (the stack creates one zonal RoCE VPC)."""
        key = f"{self.root}network.gpudirectCidr"
        # The written pools (one that failed its own checks counts) and the resolved ones (only they
        # know their machine type, which decides whether a DRANET pool attaches the stack's VPCs).
        if not any(p.multi_network or p.second_network for p in self.config.gpu_pools) and not any(
            p.stack_networks for p in pools
        ):
            # A pool that failed its own checks may be the one with gpudirect: not judged then.
            if network.gpudirect_cidr is not None and not self.broken.any_pool():
                self.problems.add(
                    key,
                    f"{cut(network.gpudirect_cidr)} would be ignored: no GPU pool has gpudirect: true on "
                    "networks this program creates (multi-networking, or DRANET on A4X Max; elsewhere "
                    "GKE's DRANET makes its own networks); remove it or turn GPUDirect on for a pool",
                )
            return network
        cidr = network.gpudirect_cidr or DEFAULT_GPUDIRECT_CIDR
        ranges = (
            []
            if network.existing
            else [
                (f"{self.root}network.{name}", value)
                for name, value in (
                    ("subnetCidr", network.subnet_cidr),
                    ("podsCidr", network.pods_cidr),
                    ("servicesCidr", network.services_cidr),
                )
            ]
        )
        shown_key = key if network.gpudirect_cidr else f"{key} (default {DEFAULT_GPUDIRECT_CIDR})"
        for problem in gpudirect_range_problems(cidr, ranges, shown_key):
            self.problems.items.append(problem)
        if network.existing:
            self.warnings.append(
                f"{key}: the GPUDirect subnets take {cidr}; the existing VPC's ranges could not be "
                "checked against it, so make sure none of them overlaps it"
            )
        resolved = {p.name: p for p in pools}
        # Per RDMA flavour (each has its own RoCE VPC), its first pool's index and zone.
        firsts: dict[str, tuple[int, str]] = {}
        for i, written in self.indexed_pools():
            pool = resolved.get(written.name)
            flavor = pool.gpudirect_flavor if pool is not None else None
            if pool is None or flavor is None or not FLAVORS[flavor].roce or not pool.stack_networks:
                continue
            if len(pool.zones or []) != 1:
                continue  # reported by the pool's own rules
            zone = (pool.zones or [""])[0]
            first_rdma = firsts.setdefault(flavor, (i, zone))
            if zone != first_rdma[1]:
                self.problems.add(
                    f"{self.root}gpuPools[{i}].zones",
                    f"{[zone]} differs from gpuPools[{first_rdma[0]}]'s zone {first_rdma[1]}: this program "
                    f"creates one RoCE VPC per stack for {flavor}, and its network profile is zonal; put the "
                    f"stack's {flavor} pools in one zone, or those of another zone in a stack of their own",
                )
        return network.model_copy(update={"gpudirect_cidr": cidr})
