"""The cluster's plan: the stack's cluster section, resolved, turned into GkeCluster's args on its network
(`NetworkRefs`: an existing VPC's names, or the Outputs of the one network/plan.py plans), with what the
other domains ask of the cluster (`ClusterFeatures`: its CSI drivers, the Gateway API, multi-networking,
the HPA profile a serving stack wants), and the command that fetches its credentials, as data. Pure:
stack/program_cluster.py declares the plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, cast

import pulumi

from .model import ClusterConfig, HpaProfile, KubeconfigEndpoint, ReleaseChannel

if TYPE_CHECKING:
    from .args import GkeClusterArgs, Maintenance


class ClusterFeatures(NamedTuple):
    """What the stack's other sections ask of its cluster (each from its domain's plan)."""

    managed_dcgm: bool = False
    # A service with an Inference Gateway (GKE's Gateway API) and one that serves models at all (the
    # performance HPA profile by default).
    gateway_api: bool = False
    serving: bool = False
    # The Cloud Storage FUSE and Managed Lustre CSI drivers (weights and training data).
    gcs_fuse: bool = False
    lustre: bool = False
    # GKE's multi-networking (GPUDirect pools, G4's second network) and a bare-metal pool (A4X Max:
    # no shielded nodes).
    multi_networking: bool = False
    bare_metal: bool = False


class NetworkRefs(NamedTuple):
    """Where the cluster's nodes and Pods live: the VPC's and subnet's names and the secondary ranges',
    values of an existing VPC or Outputs of the one the stack creates."""

    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: pulumi.Input[str]
    services_range_name: pulumi.Input[str]


class ClusterPlan(NamedTuple):
    """The cluster, where it is and what the other sections ask of it."""

    cluster: ClusterConfig
    project: str
    stack: str
    features: ClusterFeatures

    def cluster_args(
        self, refs: NetworkRefs, *, fleet_project: str | None = None, labels: dict[str, str] | None = None
    ) -> GkeClusterArgs:
        """GkeCluster's args on `refs` (`fleet_project`: a member of that project's fleet; `labels`:
        added to its GCP labels, a fleet's)."""
        cluster, features = self.cluster, self.features
        assert cluster.name is not None and cluster.location is not None, "the cluster rules resolve both"
        args: GkeClusterArgs = {
            "project": self.project,
            "name": cluster.name,
            "location": cluster.location,
            "autopilot": cluster.autopilot,
            "network": refs.network,
            "subnetwork": refs.subnetwork,
            "pods_range_name": refs.pods_range_name,
            "services_range_name": refs.services_range_name,
            "release_channel": ReleaseChannel(cluster.release_channel),
            "private_nodes": cluster.private_nodes,
            "public_endpoint": cluster.public_endpoint,
            "authorized_networks": [
                {"cidr_block": n.cidr_block, "display_name": n.display_name}
                for n in cluster.authorized_networks
            ],
            "binary_authorization": cluster.binary_authorization,
            "kubeconfig_endpoint": KubeconfigEndpoint(cluster.kubeconfig_endpoint),
            "dns_endpoint_external": cluster.dns_endpoint_external,
            "deletion_protection": cluster.deletion_protection,
            "managed_dcgm": features.managed_dcgm,
            "resource_labels": {
                "managed-by": "pulumi",
                "pulumi-stack": label_value(self.stack),
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
        if features.gateway_api:
            args["gateway_api"] = True
        if profile := hpa_profile(cluster, serving=features.serving):
            args["hpa_profile"] = profile
        if cluster.auto_monitoring is not None:
            args["auto_monitoring"] = cluster.auto_monitoring
        if features.lustre:
            args["lustre_csi_driver"] = True
        if not cluster.autopilot:
            # Standard only: the config refuses these on Autopilot.
            args["intranode_visibility"] = cluster.intranode_visibility
            if features.bare_metal:
                args["shielded_nodes"] = False
            if features.multi_networking:
                args["multi_networking"] = True
            if features.gcs_fuse:
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
        return args

    def get_credentials(self) -> str:
        """The command that writes the cluster's kubeconfig entry (through its DNS endpoint)."""
        cluster = self.cluster
        return (
            f"gcloud container clusters get-credentials {cluster.name} "
            f"--location {cluster.location} --project {self.project} --dns-endpoint"
        )


def plan_cluster(
    cluster: ClusterConfig, *, project: str, stack: str, features: ClusterFeatures
) -> ClusterPlan:
    """The cluster's plan (`stack`: the stack's name, which labels its resources)."""
    assert cluster.name is not None, "the cluster rules resolve the name"
    return ClusterPlan(cluster, project, stack, features)


def hpa_profile(cluster: ClusterConfig, *, serving: bool) -> HpaProfile | None:
    """The cluster's HPA profile: as set, else performance where the stack serves models (their
    autoscalers scale on vLLM's queue, a custom metric the profile collects faster; GKE's own serving
    guides create such clusters with it), else None: GKE's own. docs/serving.md, "The HPA profile"."""
    if cluster.hpa_profile is not None:
        return HpaProfile(cluster.hpa_profile)
    return HpaProfile.PERFORMANCE if serving else None


def label_value(text: str) -> str:
    """A GCP label value (lowercase letters, digits, '-' and '_', at most 63 characters)."""
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in text.lower())
    return cleaned[:63]
