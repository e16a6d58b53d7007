"""The stack file's GPU pools (`gke-gpu:gpuPools`): each checked by the same catalog rules GpuNodePool
runs on its args (gpu/rules.py), keyed in the stack file's camelCase; what spans pools (unique names,
the system pool's names) is checked here; and an existing generic cluster's GPU layer
(`gke-gpu:devicePlugin`, `gke-gpu:gpuNodes`)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic.alias_generators import to_camel

from ..cluster.model import ClusterConfig
from ..core.common import DNS_SUBDOMAIN, LABEL_VALUE_PATTERN, cut, valid_label_key
from ..core.section import SectionContext
from .device_plugin_config import DevicePluginConfig
from .pool import GpuPool
from .rule_base import PoolPlace
from .rules import GpuPoolRules

Written = Sequence[tuple[int, GpuPool]]


def pool_rules(cluster: ClusterConfig, ctx: SectionContext, *, written: ClusterConfig) -> GpuPoolRules:
    """The catalog rules for one pool of this stack: the same rules GpuNodePool runs on its args,
    with the stack file's camelCase keys (`written`: the cluster section as written, whose release
    channel and minimum version gate the pool's features)."""
    place = PoolPlace(
        ctx.region,
        ctx.region_known,
        cluster.location,
        written.release_channel,
        written.minimum_version,
        ctx.key("cluster.minimumVersion"),
    )
    return GpuPoolRules(ctx.catalog, place, autopilot=cluster.autopilot, camel_keys=True)


def check_pools(
    written: Written, cluster: ClusterConfig, ctx: SectionContext, *, cluster_written: ClusterConfig
) -> tuple[GpuPool, ...]:
    """The shape-valid pools (`written`, with their index in the stack file), each checked and resolved
    by the pool rules; names unique, and none of the system pool's."""
    if cluster.mode == "existing":
        if written:
            ctx.problems.add(
                ctx.key("gpuPools"),
                "not allowed with cluster.mode existing: node pools of an existing cluster are "
                "not managed here (use gpuNodes and devicePlugin for a generic cluster)",
            )
        return ()
    seen: dict[str, int] = {}
    resolved: list[GpuPool] = []
    for i, pool in written:
        path = ctx.key(f"gpuPools[{i}]")
        if pool.name in seen:
            ctx.problems.add(
                f"{path}.name",
                f"{cut(pool.name)} is already used by gpuPools[{seen[pool.name]}]; pool names must be unique",
            )
        seen.setdefault(pool.name, i)
        rules = pool_rules(cluster, ctx, written=cluster_written)
        result = rules.check(pool, path)
        ctx.problems.items += rules.problems.items
        ctx.notes.extend(rules.warnings)
        if result is not None:
            resolved.append(result)
        else:
            ctx.broken.pools.add(pool.name)
    return tuple(resolved)


def check_pool_names(written: Written, cluster: ClusterConfig, ctx: SectionContext) -> None:
    """A Standard cluster's system pool takes its names."""
    if cluster.mode == "standard" and cluster.system_pool:
        reserved = {"system", "default-pool"}
        for i, pool in written:
            if pool.name in reserved:
                ctx.problems.add(
                    ctx.key(f"gpuPools[{i}].name"),
                    f"{cut(pool.name)} is reserved for the system pool; choose another name",
                )


def check_existing_gpu_layer(
    plugin: DevicePluginConfig | None,
    gpu_nodes: Sequence[str] | None,
    cluster: ClusterConfig,
    ctx: SectionContext,
) -> tuple[DevicePluginConfig | None, tuple[str, ...]]:
    """An existing generic cluster's device plugin (its config, defaulted) and the nodes to label;
    refused elsewhere (GKE ships its own plugin and labels its GPU nodes)."""
    generic = cluster.mode == "existing" and cluster.flavor == "generic"
    if not generic:
        for key, value in (("device_plugin", plugin), ("gpu_nodes", gpu_nodes)):
            if value is not None:
                ctx.problems.add(
                    ctx.key(to_camel(key)),
                    "only allowed with cluster.mode existing and cluster.flavor generic "
                    "(GKE ships its own device plugin and labels its GPU nodes)",
                )
        return None, ()
    plugin = plugin or DevicePluginConfig()
    label = plugin.gpu_node_label
    key, _, value = label.partition("=")
    if "=" not in label or not key or not valid_label_key(key) or not LABEL_VALUE_PATTERN.fullmatch(value):
        ctx.problems.add(
            ctx.key("devicePlugin.gpuNodeLabel"),
            f"{cut(label)} is not a Kubernetes label selector of the form key=value (e.g. "
            "nvidia.com/gpu.present=true or gpus=true)",
        )
    nodes = tuple(gpu_nodes or ())
    for j, node in enumerate(nodes):
        if not DNS_SUBDOMAIN.fullmatch(node) or len(node) > 253:
            ctx.problems.add(ctx.key(f"gpuNodes[{j}]"), f"{cut(node)} is not a Kubernetes node name")
    if len(set(nodes)) != len(nodes):
        ctx.problems.add(ctx.key("gpuNodes"), "lists a node twice")
    return plugin, nodes
