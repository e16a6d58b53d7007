"""The second pass over a stack file's sections: each domain's section rules, in order, each seeing only
what passed the one before (`<domain>/section.py`: `check_<section>(section, context, ...)`). This module
only loops and hands each rule the sections it reads; the rules are the domains'. The result is
`Settings`, every default resolved; every problem is raised at once as one ConfigError."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..cluster.section import check_cluster
from ..core.catalog import Catalog
from ..core.common import NAMESPACE, PROJECT_PATTERN, ConfigError, cut, listing
from ..core.messages import format_path
from ..core.section import Broken, SectionContext, indexed
from ..dra.section import check_dra_pools
from ..gpu.device_plugin_config import DevicePluginConfig
from ..gpu.section import check_existing_gpu_layer, check_pool_names, check_pools
from ..gpudirect.section import check_gpudirect_range
from ..monitoring.model import MonitoringConfig
from ..monitoring.section import check_monitoring
from ..network.model import NetworkConfig
from ..network.section import (
    check_address_capacity,
    check_gateway_subnet,
    check_network,
    check_no_network,
    note_cloud_nat,
)
from ..serving.model import ServingConfig
from ..workloads.batch_section import check_batch, note_served_pools
from ..workloads.model import BatchConfig
from ..workloads.section import Around, check_workloads
from .images_section import check_image_digests
from .settings import Settings
from .stack_model import StackConfig, dashboard_on


class Place(NamedTuple):
    """Where a set of sections sits in the stack file and its GCP context: a stack file's own (the
    defaults), or a fleet worker's (`root_loc` `("fleet", "workers", 1)`, its region its own key)."""

    project: str | None
    region: str | None
    stack: str
    root_loc: tuple[Any, ...] = ()
    project_key: str = "gcp:project"
    secret_keys: frozenset[str] | None = None

    @property
    def root(self) -> str:
        return f"{format_path(self.root_loc)}." if self.root_loc else f"{NAMESPACE}:"

    @property
    def region_key(self) -> str:
        return format_path((*self.root_loc, "region")) if self.root_loc else "gcp:region"


def resolve(
    config: StackConfig, broken: Broken, place: Place, catalog: Catalog
) -> tuple[Settings, list[str]]:
    """Check a shape-valid StackConfig for meaning and resolve it into Settings; returns its notes too,
    or raises ConfigError with every problem (`broken`: what failed the first pass)."""
    ctx = SectionContext(
        root=place.root,
        project=place.project,
        region=place.region,
        stack=place.stack,
        catalog=catalog,
        broken=broken,
        secret_keys=place.secret_keys,
    )
    cfg = config
    mode = cfg.cluster.mode
    # An existing cluster without a flavor (reported) or a broken monitoring section leaves the
    # dashboard and alert defaults unknown: rules that depend on them are skipped.
    ctx.flavor_unknown = mode == "existing" and cfg.cluster.flavor is None
    monitoring_known = "monitoring" not in broken.sections and not ctx.flavor_unknown
    dashboard_or_alerts = dashboard_on(cfg) or cfg.monitoring.alerts.enabled
    if mode != "existing" or (monitoring_known and dashboard_or_alerts):
        _check_gcp(place, ctx, existing=mode == "existing")
    cluster = check_cluster(cfg.cluster, ctx, dashboard_or_alerts=dashboard_or_alerts)
    network: NetworkConfig | None
    if mode == "existing":
        check_no_network(cfg.network, ctx)
        network = None
    else:
        network = None if "network" in broken.sections else check_network(cfg.network, ctx)
    written_pools = indexed(cfg.gpu_pools, broken.pool_indexes)
    pools = check_pools(written_pools, cluster, ctx, cluster_written=cfg.cluster)
    if cluster.mode != "existing":
        check_dra_pools(written_pools, pools, ctx)
        check_pool_names(written_pools, cluster, ctx)
    if network is not None:
        network = check_gpudirect_range(network, written_pools, pools, ctx)
    monitoring = (
        check_monitoring(
            cfg.monitoring,
            cluster,
            written_pools,
            ctx,
            dashboard=dashboard_on(cfg),
            serving=bool(cfg.serving),
        )
        if monitoring_known
        else MonitoringConfig(dcgm="none", dashboard=False)
    )
    around = Around(
        cluster=cluster,
        written_pools=cfg.gpu_pools,
        pools=pools,
        services=[s.name for s in cfg.serving],
        kueue=cfg.batch.kueue,
        plugin_sharing=bool(cfg.device_plugin and cfg.device_plugin.sharing),
    )
    workloads = check_workloads(indexed(cfg.workloads, broken.workload_indexes), around, ctx)
    device_plugin: DevicePluginConfig | None
    gpu_nodes: tuple[str, ...]
    if {"devicePlugin", "gpuNodes"} & broken.sections or ctx.flavor_unknown:
        device_plugin, gpu_nodes = None, ()
    else:
        device_plugin, gpu_nodes = check_existing_gpu_layer(cfg.device_plugin, cfg.gpu_nodes, cluster, ctx)
    batch = (
        check_batch(cfg.batch, cluster, pools, ctx, pools_written=bool(cfg.gpu_pools))
        if "batch" not in broken.sections
        else BatchConfig()
    )
    services = indexed(cfg.serving, broken.serving_indexes)
    serving: tuple[ServingConfig, ...] = ()
    if services and "serving" not in broken.sections:
        # Imported here: a stack without model servers does not pay for their rules' modules.
        from ..serving.section import check_serving

        serving = check_serving(services, cluster, pools, ctx)
    if serving:
        note_served_pools(cfg.batch, {s.pool for s in serving}, ctx)
    if network is not None and "serving" not in broken.sections:
        gateways = [f"serving[{i}]" for i, s in services if s.gateway]
        network = check_gateway_subnet(network, gateways, ctx)
    image_digests = (
        check_image_digests(cfg, pools, monitoring, device_plugin is not None, ctx)
        if "images" not in broken.sections
        else {}
    )
    capacity_known = not broken.any_pool() and "systemPool" not in broken.cluster_keys
    if network is not None and cluster.mode == "standard" and capacity_known:
        check_address_capacity(network, cluster, [p.max_nodes for p in pools], ctx)
    if network is not None:
        note_cloud_nat(network, private_nodes=cluster.private_nodes, ctx=ctx)
    if ctx.problems.items:
        raise ConfigError(ctx.problems.items)
    settings = Settings(
        project=place.project,
        region=place.region,
        stack=place.stack,
        cluster=cluster,
        network=network,
        gpu_pools=pools,
        monitoring=monitoring,
        workloads=workloads,
        device_plugin=device_plugin,
        gpu_nodes=gpu_nodes,
        batch=batch,
        serving=serving,
        image_digests=image_digests,
    )
    return settings, ctx.notes


def _check_gcp(place: Place, ctx: SectionContext, *, existing: bool) -> None:
    """gcp:project (and, for a cluster the program creates, gcp:region: then the zone rules run)."""
    needed_for = "the dashboard or alerts" if existing else None
    suffix = f" (needed for {needed_for})" if needed_for else ""
    project, region = place.project, place.region
    if not project:
        ctx.problems.add(
            place.project_key, f"required{suffix}; set it with `pulumi config set gcp:project <project-id>`"
        )
    elif not PROJECT_PATTERN.fullmatch(project):
        ctx.problems.add(
            place.project_key,
            f"{cut(project)} is not a GCP project ID (6-30 lowercase letters, digits, hyphens, "
            "starting with a letter)",
        )
    if existing:
        return
    regions = ctx.catalog.gcp_regions
    if not region:
        ctx.problems.add(
            place.region_key, f"required{suffix}; set it with `pulumi config set gcp:region us-central1`"
        )
    elif region not in regions:
        import difflib

        close = difflib.get_close_matches(region, regions, n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}? " if close else ""
        ctx.problems.add(
            place.region_key,
            f"{cut(region)} is not a Compute Engine region; {hint}regions: {listing(regions)}",
        )
    else:
        ctx.region_known = True
