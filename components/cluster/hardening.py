"""CIS GKE hardening of the cluster that is not about who reaches the control plane (gke_cluster.py
`control_plane_access`): the kubelet's read-only port, application-layer secrets encryption, the
DNS endpoint's external access, and Google Groups for RBAC. Each is a field of GkeClusterSettings
(model.py), with its reason.

Sources: CIS GKE Benchmark 3.2.4 ("Ensure that the --read-only-port is disabled"; GKE's hardening
guide, "Disable the kubelet read-only port"); GKE's "Disable the kubelet read-only port" page
(`insecure_kubelet_readonly_port_enabled`, per node pool, cluster-wide for new pools, and Autopilot's
node_pool_auto_config); CIS GKE 5.3.1 ("Ensure Kubernetes Secrets are encrypted using keys managed
in Cloud KMS"; GKE's "Encrypt secrets at the application layer"); GKE's "About control plane
access" (the DNS-based endpoint, `allowExternalTraffic`). Field names: pulumi_gcp 10.2.0
container/_inputs.py (ClusterNodePoolDefaultsNodeConfigDefaultsArgs, ClusterNodePoolAutoConfigArgs,
ClusterNodePoolAutoConfigNodeKubeletConfigArgs, NodePoolNodeConfigKubeletConfigArgs,
ClusterDatabaseEncryptionArgs, ClusterAuthenticatorGroupsConfigArgs: "The name of the RBAC security
group for use with Google security groups in Kubernetes RBAC. Group name must be in format
gke-security-groups@yourdomain.com"); GKE's "Configure Google Groups for RBAC" (the group must be named
gke-security-groups in your domain, with the team groups nested in it, read 2026-12).
"""

from typing import TYPE_CHECKING, TypedDict

import pulumi
from pulumi_gcp import container

if TYPE_CHECKING:
    from .args import GkeClusterSpec

# Nodes get the cloud-platform scope; their service account's IAM roles, not scopes, limit them.
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

# The provider's enum for the port: "TRUE" or "FALSE" (a string, not a bool).
READ_ONLY_PORT_OFF = "FALSE"


class ClusterHardening(TypedDict, total=False):
    """container.Cluster's inputs this module sets."""

    node_pool_defaults: container.ClusterNodePoolDefaultsArgs
    node_pool_auto_config: container.ClusterNodePoolAutoConfigArgs
    database_encryption: container.ClusterDatabaseEncryptionArgs
    authenticator_groups_config: container.ClusterAuthenticatorGroupsConfigArgs


def node_kubelet_config() -> container.NodePoolNodeConfigKubeletConfigArgs:
    """Every node pool's kubelet: the unauthenticated read-only port (10255) off. Nothing this program
    runs reads it (the DCGM exporter and GKE's managed metrics use the authenticated port)."""
    return container.NodePoolNodeConfigKubeletConfigArgs(
        insecure_kubelet_readonly_port_enabled=READ_ONLY_PORT_OFF
    )


def cluster_hardening(spec: "GkeClusterSpec") -> ClusterHardening:
    """The cluster's own inputs: the read-only port off for the pools GKE creates (Standard: new
    pools' defaults; Autopilot: every node), and secrets encrypted with the stack's KMS key."""
    hardening: ClusterHardening = {}
    if spec.autopilot:
        hardening["node_pool_auto_config"] = container.ClusterNodePoolAutoConfigArgs(
            node_kubelet_config=container.ClusterNodePoolAutoConfigNodeKubeletConfigArgs(
                insecure_kubelet_readonly_port_enabled=READ_ONLY_PORT_OFF
            )
        )
    else:
        hardening["node_pool_defaults"] = container.ClusterNodePoolDefaultsArgs(
            node_config_defaults=container.ClusterNodePoolDefaultsNodeConfigDefaultsArgs(
                insecure_kubelet_readonly_port_enabled=READ_ONLY_PORT_OFF
            )
        )
    if spec.secrets_encryption_key:
        # The key's project must let GKE's service agent (service-<number>@container-engine-robot)
        # use it (roles/cloudkms.cryptoKeyEncrypterDecrypter); the program does not grant that.
        hardening["database_encryption"] = container.ClusterDatabaseEncryptionArgs(
            state="ENCRYPTED", key_name=spec.secrets_encryption_key
        )
    if spec.rbac_security_group:
        # Updated in place (not ForceNew: tests/schemas/provider_force_new.json).
        hardening["authenticator_groups_config"] = container.ClusterAuthenticatorGroupsConfigArgs(
            security_group=spec.rbac_security_group
        )
    return hardening


class HardenedNodeSettings(TypedDict):
    """container.NodePoolNodeConfigArgs fields every node pool shares (hardened_node_settings)."""

    service_account: pulumi.Input[str] | None
    oauth_scopes: list[str]
    metadata: dict[str, str]
    shielded_instance_config: container.NodePoolNodeConfigShieldedInstanceConfigArgs
    workload_metadata_config: container.NodePoolNodeConfigWorkloadMetadataConfigArgs
    kubelet_config: container.NodePoolNodeConfigKubeletConfigArgs


def hardened_node_settings(service_account_email: pulumi.Input[str] | None) -> HardenedNodeSettings:
    """NodePoolNodeConfigArgs fields every node pool shares: the dedicated service account (its
    IAM roles, not OAuth scopes, limit it; None: the project's Compute Engine default service
    account, as GpuNodePool without `node_service_account_email`), Workload Identity metadata (Pods
    never see the node's credentials), Shielded VM with secure boot (GKE's GPU drivers are signed)
    and the legacy metadata endpoints off. All but the workload metadata mode are ForceNew: changing
    one recreates the pool."""
    return {
        "service_account": service_account_email,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        "metadata": {"disable-legacy-endpoints": "true"},
        "shielded_instance_config": container.NodePoolNodeConfigShieldedInstanceConfigArgs(
            enable_secure_boot=True, enable_integrity_monitoring=True
        ),
        "workload_metadata_config": container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
            mode="GKE_METADATA"
        ),
        "kubelet_config": node_kubelet_config(),
    }
