"""The stack's cluster and the VPC it creates for it: the composition root's first step."""

from __future__ import annotations

from typing import cast

import pulumi

from ..cluster.args import GkeClusterArgs, HpaProfile, KubeconfigEndpoint, Maintenance, ReleaseChannel
from ..cluster.gke_cluster import GkeCluster
from ..gpu.bare_metal import is_bare_metal
from ..network.vpc import GkeNetwork
from .declare import declare
from .program_batch import team_data_drivers
from .program_gpudirect import multi_network_flavors
from .program_serving import needs_gateway_api, needs_gcs_fuse
from .settings import Settings


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
    assert cluster.name is not None and cluster.location is not None, "the cluster rules resolve both"
    project = settings.project or ""
    region = settings.region or ""
    if settings.network and settings.network.existing:
        existing = settings.network.existing
        network: pulumi.Input[str] = existing.network
        subnetwork: pulumi.Input[str] = existing.subnetwork
        pods_range: pulumi.Input[str] = existing.pods_range_name
        services_range: pulumi.Input[str] = existing.services_range_name
        vpc = None
    else:
        assert settings.network and settings.network.subnet_cidr
        vpc = declare(
            GkeNetwork,
            f"{prefix}network",
            {
                "project": project,
                "region": region,
                "name_prefix": cluster.name,
                "subnet_cidr": settings.network.subnet_cidr,
                "pods_cidr": settings.network.pods_cidr or "",
                "services_cidr": settings.network.services_cidr or "",
                "cloud_nat": cluster.private_nodes,
                "flow_log_sampling": settings.network.flow_log_sampling or 0,
                # Resolved only when a service has a gateway: no proxy-only subnet otherwise.
                **(
                    {"proxy_only_cidr": settings.network.proxy_only_cidr}
                    if settings.network.proxy_only_cidr
                    else {}
                ),
            },
        )
        network, subnetwork = vpc.network_self_link, vpc.subnetwork_self_link
        pods_range, services_range = vpc.pods_range_name, vpc.services_range_name
    args: GkeClusterArgs = {
        "project": project,
        "name": cluster.name,
        "location": cluster.location,
        "autopilot": cluster.autopilot,
        "network": network,
        "subnetwork": subnetwork,
        "pods_range_name": pods_range,
        "services_range_name": services_range,
        "release_channel": ReleaseChannel(cluster.release_channel),
        "private_nodes": cluster.private_nodes,
        "public_endpoint": cluster.public_endpoint,
        "authorized_networks": [
            {"cidr_block": n.cidr_block, "display_name": n.display_name} for n in cluster.authorized_networks
        ],
        "binary_authorization": cluster.binary_authorization,
        "kubeconfig_endpoint": KubeconfigEndpoint(cluster.kubeconfig_endpoint),
        "dns_endpoint_external": cluster.dns_endpoint_external,
        "deletion_protection": cluster.deletion_protection,
        "managed_dcgm": settings.monitoring.dcgm == "managed",
        "resource_labels": {
            "managed-by": "pulumi",
            "pulumi-stack": _label_value(settings.stack),
            **(labels or {}),
        },
    }
    if fleet_project:
        args["fleet_project"] = fleet_project
    if cluster.minimum_version:
        args["minimum_version"] = cluster.minimum_version
    if cluster.maintenance:
        args["maintenance"] = cast("Maintenance", cluster.maintenance.model_dump(exclude_none=True))
    if cluster.control_plane_global_access:
        args["control_plane_global_access"] = True
    if cluster.secrets_encryption_key:
        args["secrets_encryption_key"] = cluster.secrets_encryption_key
    if cluster.rbac_security_group:
        args["rbac_security_group"] = cluster.rbac_security_group
    if needs_gateway_api(settings):
        args["gateway_api"] = True
    if hpa_profile := stack_hpa_profile(settings):
        args["hpa_profile"] = hpa_profile
    if cluster.auto_monitoring is not None:
        args["auto_monitoring"] = cluster.auto_monitoring
    bucket_volumes, lustre_volumes = team_data_drivers(settings)
    if lustre_volumes:
        args["lustre_csi_driver"] = True
    if not cluster.autopilot:
        # Standard only: the config refuses both on Autopilot.
        args["intranode_visibility"] = cluster.intranode_visibility
        if any(is_bare_metal(p.machine_type) for p in settings.gpu_pools):
            args["shielded_nodes"] = False
        if multi_network_flavors(settings) or any(p.second_network for p in settings.gpu_pools):
            args["multi_networking"] = True
        if needs_gcs_fuse(settings) or bucket_volumes:
            args["gcs_fuse_csi_driver"] = True
        if cluster.system_pool is not None:
            pool = cluster.system_pool
            args["system_pool"] = {
                "machine_type": pool.machine_type,
                "min_nodes": pool.min_nodes,
                "max_nodes": pool.max_nodes,
                "spot": pool.spot,
                "disk_size_gb": pool.disk_size_gb,
            }
            if pool.disk_type is not None:
                args["system_pool"]["disk_type"] = pool.disk_type
    return declare(GkeCluster, f"{prefix}gke", args), vpc


def stack_hpa_profile(settings: Settings) -> HpaProfile | None:
    """The cluster's HPA profile: as set, else performance where the stack serves models (their
    autoscalers scale on vLLM's queue, a custom metric the profile collects faster; GKE's own serving
    guides create such clusters with it), else None: GKE's own. docs/serving.md, "The HPA profile"."""
    if settings.cluster.hpa_profile is not None:
        return HpaProfile(settings.cluster.hpa_profile)
    return HpaProfile.PERFORMANCE if settings.serving else None


def _label_value(text: str) -> str:
    """A GCP label value (lowercase letters, digits, '-' and '_', at most 63 characters)."""
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in text.lower())
    return cleaned[:63]
