"""The cluster section (the stack file's `gke-gpu:cluster`): mode, endpoint, system pool, an existing
cluster."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from ..core.arg_types import DcgmFlavor, enum_values
from ..core.common import (
    MAX_AUTHORIZED_NETWORKS_PRIVATE,
    MAX_BOOT_DISK_GB,
    MAX_NODES_PER_POOL,
)
from ..core.model import (
    GCE_NAME,
    GKE_VERSION,
    KMS_KEY,
    PRINTABLE,
    RBAC_SECURITY_GROUP,
    RFC3339,
    TIME_OF_DAY,
    Cidr,
    MachineTypeName,
    StackModel,
    example,
)


class ReleaseChannel(StrEnum):
    """A GKE release channel: how soon the cluster gets new GKE versions."""

    RAPID = "RAPID"
    """The newest versions, first."""
    REGULAR = "REGULAR"
    """Versions that have been in RAPID for a while."""
    STABLE = "STABLE"
    """Versions that have been in REGULAR for a while."""
    EXTENDED = "EXTENDED"
    """A minor version supported for up to 24 months."""


class KubeconfigEndpoint(StrEnum):
    """The control-plane endpoint the kubeconfig (and so the Kubernetes provider) uses."""

    DNS = "dns"
    """The DNS-based endpoint, every request checked by IAM (works with the IP endpoint closed)."""
    IP = "ip"
    """The IP endpoint, as stacks created before the DNS endpoint had it (docs/configuration.md,
    'Upgrading')."""


class AuthorizedNetworkConfig(StackModel):
    model_config = example(cidrBlock="203.0.113.0/24", displayName="office")

    cidr_block: Cidr
    display_name: Annotated[str, Field(max_length=100, pattern=PRINTABLE)] = ""


class SystemPoolConfig(StackModel):
    model_config = example(machineType="e2-standard-4", minNodes=1, maxNodes=3)

    machine_type: MachineTypeName = "e2-standard-4"
    min_nodes: int = Field(1, ge=0, le=MAX_NODES_PER_POOL)
    max_nodes: int = Field(3, ge=1, le=MAX_NODES_PER_POOL)
    spot: bool = False
    disk_size_gb: int = Field(100, ge=10, le=MAX_BOOT_DISK_GB)
    # The boot disk type; defaults to the machine series' first (cluster/boot_disks.py).
    disk_type: Annotated[str, Field(max_length=40)] | None = None


# The first GKE version whose Managed Lustre CSI driver GKE documents (GKE "About the Managed Lustre
# CSI driver", Requirements: cluster 1.33.2-gke.1111000 or later, COS x86_64 nodes; read in the
# page's zh-CN and ko copies, 2026-11). docs/teams.md, "Training data".
LUSTRE_CSI_MIN_VERSION = "1.33.2-gke.1111000"


class HpaProfile(StrEnum):
    """GKE's Horizontal Pod Autoscaler profile (the cluster's `podAutoscaling.hpaProfile`)."""

    PERFORMANCE = "performance"
    """More HPAs per cluster and faster metrics collection for autoscaling (GKE's PERFORMANCE)."""
    NONE = "none"
    """Opted out of HPA profiles (GKE's NONE)."""


class ExclusionScope(StrEnum):
    """What a maintenance exclusion holds back (cluster/maintenance.py)."""

    NO_UPGRADES = "NO_UPGRADES"
    """Every upgrade of the control plane and nodes, patches too (at most 30 days)."""
    NO_MINOR_UPGRADES = "NO_MINOR_UPGRADES"
    """Minor upgrades; patches go on."""
    NO_MINOR_OR_NODE_UPGRADES = "NO_MINOR_OR_NODE_UPGRADES"
    """Minor upgrades and every node upgrade; only control-plane patches go on (cluster-toolkit's
    choice for training clusters)."""


# GKE's provider takes at most 20 exclusions (terraform-provider-google container_cluster docs).
MAX_MAINTENANCE_EXCLUSIONS = 20


class MaintenanceExclusionConfig(StackModel):
    model_config = example(
        name="hold-training",
        start="2027-01-01T00:00:00Z",
        untilEndOfSupport=True,
        scope="NO_MINOR_OR_NODE_UPGRADES",
    )

    name: Annotated[str, Field(max_length=63, pattern=GCE_NAME)]
    start: Annotated[str, Field(max_length=40, pattern=RFC3339)]
    end: Annotated[str, Field(max_length=40, pattern=RFC3339)] | None = None
    until_end_of_support: bool = False
    scope: enum_values(ExclusionScope)  # type: ignore[valid-type]


class MaintenanceConfig(StackModel):
    model_config = example(dailyWindowStart="09:00")

    daily_window_start: Annotated[str, Field(pattern=TIME_OF_DAY)] | None = None
    exclusions: list[MaintenanceExclusionConfig] = Field(
        default_factory=list, max_length=MAX_MAINTENANCE_EXCLUSIONS
    )


class GkeClusterSettings(StackModel):
    """The cluster's settings that are not secure defaults: one model for the stack file's `cluster`
    section (camelCase keys, ClusterConfig) and GkeCluster's args (snake_case names, GkeClusterSpec),
    so each field's type, bounds and default are written once."""

    release_channel: enum_values(ReleaseChannel) = "REGULAR"  # type: ignore[valid-type]
    private_nodes: bool = True
    # The stack file has always called it masterAuthorizedNetworks (GKE's own name); the args, shorter.
    authorized_networks: Annotated[
        list[AuthorizedNetworkConfig],
        Field(
            default_factory=list, max_length=MAX_AUTHORIZED_NETWORKS_PRIVATE, alias="masterAuthorizedNetworks"
        ),
    ]
    deletion_protection: bool = True
    system_pool: SystemPoolConfig | None = None
    # The control plane's IP endpoint is private unless publicEndpoint is true; the DNS-based
    # endpoint (IAM-authorised) is always on, so CI reaches the cluster without an IP allowlist.
    public_endpoint: bool = False
    binary_authorization: bool = False
    # Standard only: opt-in, because turning it on for an existing cluster restarts every node.
    intranode_visibility: bool = False
    # Which endpoint the program's kubeconfig (and so `pulumi up`) uses: the DNS endpoint, or the IP
    # endpoint as before (the first step of moving an existing stack, see docs/configuration.md "Upgrading").
    kubeconfig_endpoint: enum_values(KubeconfigEndpoint) = "dns"  # type: ignore[valid-type]
    # The control plane's minimum GKE version (cluster/maintenance.py): GKE upgrades it within the
    # release channel unless a maintenance exclusion holds it; the pools' version gates check it.
    minimum_version: Annotated[str, Field(max_length=30, pattern=GKE_VERSION)] | None = None
    maintenance: MaintenanceConfig | None = None
    # The DNS endpoint accepts requests from outside Google Cloud (IAM still checks each). False: only
    # from Google Cloud's networks (a VPC with Private Google Access, Cloud Build private pools).
    dns_endpoint_external: bool = True
    # The IP endpoint's private address reachable from every region, not only the cluster's (GKE's
    # control-plane global access): a fleet's manager reaches its workers there.
    control_plane_global_access: bool = False
    # Application-layer secrets encryption (CIS GKE 5.3.1) with this Cloud KMS key, in the cluster's
    # location: projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>.
    secrets_encryption_key: Annotated[str, Field(max_length=400, pattern=KMS_KEY)] | None = None
    # Google Groups for RBAC (the cluster's authenticatorGroupsConfig.securityGroup): the group
    # `gke-security-groups@<your domain>` whose nested groups RoleBindings may name (GKE "Configure Google
    # Groups for RBAC"). Needed where batch.teams[].members names a group (stack/batch_section.py).
    rbac_security_group: Annotated[str, Field(max_length=254, pattern=RBAC_SECURITY_GROUP)] | None = None
    # GKE's HPA profile (docs/serving.md, "The HPA profile"). Unset: left to GKE, unless the stack serves
    # models (then performance: stack/program_cluster.py).
    hpa_profile: enum_values(HpaProfile) | None = None  # type: ignore[valid-type]
    # Managed Prometheus' automatic application monitoring (scope ALL on true, NONE on false). Unset:
    # left to GKE (docs/serving.md, "Automatic application monitoring").
    auto_monitoring: bool | None = None


class _ClusterChoice(StackModel):
    """The stack file's choice of cluster, first in its section (and so in its problems): the mode,
    and a name and location the stack defaults."""

    mode: Literal["autopilot", "standard", "existing"]
    name: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    location: Annotated[str, Field(min_length=1, max_length=40)] | None = None


# The choice's keys come first (pydantic orders fields by reversed MRO), then the settings, then the
# section's own keys: the order the section had before the settings became one model with the args.
class ClusterConfig(GkeClusterSettings, _ClusterChoice):
    """The stack file's `gke-gpu:cluster`: the choice of cluster, GkeCluster's settings, and an
    existing cluster's kubeconfig."""

    model_config = example(mode="autopilot")

    # Explicitly allow a public IP endpoint with no allowlist or with 0.0.0.0/0.
    public_endpoint_open_to_internet: bool = False
    # Binary Authorization off in a stack named prod, meant (cluster_section.py).
    binary_authorization_off_acknowledged: bool = False
    # mode: existing
    kubeconfig: str | None = Field(None, repr=False, min_length=1, max_length=1_000_000)
    context: Annotated[str, Field(min_length=1, max_length=253, pattern=PRINTABLE)] | None = None
    flavor: enum_values(DcgmFlavor) | None = None  # type: ignore[valid-type]

    @property
    def autopilot(self) -> bool:
        return self.mode == "autopilot"

    @property
    def on_gke(self) -> bool:
        """True when the GPU nodes are GKE nodes (drivers, labels and device plugin from GKE)."""
        return self.mode != "existing" or self.flavor == "gke"
