"""The stack's cluster and the VPC it creates for it (the composition root's first step), as the cluster's
plan gives them (cluster/plan.py), with what the other sections ask of the cluster gathered from their
domains."""

from __future__ import annotations

from ..cluster.gke_cluster import GkeCluster
from ..cluster.plan import ClusterFeatures, ClusterPlan, NetworkRefs, plan_cluster
from ..gpu.bare_metal import is_bare_metal
from ..gpudirect.plan import multi_networking
from ..network.plan import existing_refs, vpc_args
from ..network.vpc import GkeNetwork
from ..workloads.batch_plan import team_data_drivers
from .declare import declare
from .settings import Settings


def cluster_plan(settings: Settings) -> ClusterPlan:
    """The cluster's plan, with what the stack's pools, services, teams and monitoring ask of it."""
    buckets, lustre = team_data_drivers(settings.batch)
    gateway_api = weights_fuse = False
    if settings.serving:
        from ..serving.cluster_needs import needs_gateway_api, needs_gcs_fuse

        gateway_api, weights_fuse = needs_gateway_api(settings.serving), needs_gcs_fuse(settings.serving)
    features = ClusterFeatures(
        managed_dcgm=settings.monitoring.dcgm == "managed",
        gateway_api=gateway_api,
        serving=bool(settings.serving),
        gcs_fuse=weights_fuse or buckets,
        lustre=lustre,
        multi_networking=multi_networking(settings.gpu_pools),
        bare_metal=any(is_bare_metal(p.machine_type) for p in settings.gpu_pools),
    )
    return plan_cluster(
        settings.cluster, project=settings.project or "", stack=settings.stack, features=features
    )


def gke_cluster(
    settings: Settings,
    prefix: str = "",
    *,
    fleet_project: str | None = None,
    labels: dict[str, str] | None = None,
) -> tuple[GkeCluster, GkeNetwork | None]:
    """The cluster, and the VPC the stack creates for it (None on an existing VPC); `prefix` starts
    its resource names (a fleet's worker's), `fleet_project` makes it a member of that project's fleet
    and `labels` are added to its GCP labels (a fleet's, stack/program_fleet.py)."""
    cluster = settings.cluster
    assert settings.network is not None and cluster.name is not None, "the rules resolve both"
    planned = vpc_args(
        settings.network,
        project=settings.project or "",
        region=settings.region or "",
        name_prefix=cluster.name,
        cloud_nat=cluster.private_nodes,
    )
    vpc: GkeNetwork | None = None
    if planned is not None:
        vpc = declare(GkeNetwork, f"{prefix}network", planned, section="network", section_checked=True)
        refs = NetworkRefs(
            vpc.network_self_link, vpc.subnetwork_self_link, vpc.pods_range_name, vpc.services_range_name
        )
    else:
        refs = existing_refs(settings.network)
    plan = cluster_plan(settings)
    args = plan.cluster_args(refs, fleet_project=fleet_project, labels=labels)
    return declare(GkeCluster, f"{prefix}gke", args, section="cluster", section_checked=True), vpc
