"""GkeCluster's args: the TypedDicts a caller writes, and the model that checks them at the boundary."""

from functools import partial
from typing import Annotated, NotRequired, TypedDict

import pulumi
from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from ..core.arg_types import ClusterName, LocationName, ProjectId
from ..core.catalog import load_catalog
from ..core.common import (
    ZONE_PATTERN,
    KeyNames,
    Problems,
    network_of,
)
from ..core.gke_version import below
from ..core.model import NETWORK_REF, SUBNETWORK_REF, GceName
from ..core.validation import ArgsModel, Deferrable
from .maintenance import check_maintenance
from .model import (
    LUSTRE_CSI_MIN_VERSION,
    ExclusionScope,
    GkeClusterSettings,
    HpaProfile,
    KubeconfigEndpoint,
    ReleaseChannel,
)
from .rules import check_nodes, check_private_nodes, check_public_endpoint_networks

MAX_RESOURCE_LABELS = 64


class AuthorizedNetwork(TypedDict):
    """An address range allowed to reach the control plane's public IP endpoint."""

    cidr_block: str
    """An IPv4 CIDR block, e.g. 203.0.113.0/24."""
    display_name: NotRequired[str]
    """A name for the range, shown in the console. Defaults to the CIDR block."""


class SystemPool(TypedDict):
    """The small non-GPU node pool for system Pods of a Standard cluster."""

    machine_type: NotRequired[str]
    """A non-GPU machine type. Defaults to e2-standard-4."""
    min_nodes: NotRequired[int]
    """Fewest nodes (the whole pool, all zones). Defaults to 1."""
    max_nodes: NotRequired[int]
    """Most nodes (the whole pool, all zones). Defaults to 3."""
    spot: NotRequired[bool]
    """Spot VMs. Defaults to false."""
    disk_size_gb: NotRequired[int]
    """Boot disk size in GB. Defaults to 100."""
    disk_type: NotRequired[str]
    """Boot disk type: one the machine series takes (N4, C4 and other Hyperdisk-only series:
    hyperdisk-balanced). Defaults to the series' first: pd-balanced, or hyperdisk-balanced."""


class MaintenanceExclusion(TypedDict):
    """A time when GKE does not upgrade the cluster (or only patches it)."""

    name: str
    """The exclusion's name: a GCE name, unique among the cluster's exclusions."""
    start: str
    """When it starts, RFC 3339 (e.g. 2027-01-01T00:00:00Z)."""
    end: NotRequired[str]
    """When it ends, RFC 3339; NO_UPGRADES lasts at most 30 days. Exactly one of `end` and
    `until_end_of_support`."""
    until_end_of_support: NotRequired[bool]
    """Hold until the running minor version's support ends (the minor scopes only). Defaults to
    false."""
    scope: ExclusionScope
    """What it holds back: NO_UPGRADES, NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES."""


class Maintenance(TypedDict):
    """When GKE may upgrade the cluster."""

    daily_window_start: NotRequired[str]
    """The daily maintenance window's start, HH:MM in UTC (GKE chooses its length). Defaults to
    none: maintenance at any time."""
    exclusions: NotRequired[list[MaintenanceExclusion]]
    """Maintenance exclusions (at most 20). Defaults to none."""


class GkeClusterArgs(TypedDict):
    """The cluster's identity, its network, and the settings that are not secure defaults."""

    project: str
    """The GCP project of the cluster and its node service account."""
    name: str
    """The cluster's name: at most 40 lowercase letters, digits and hyphens, starting with a letter."""
    location: str
    """The region (a regional cluster) or one of its zones (a zonal cluster, Standard only)."""
    autopilot: bool
    """Autopilot (true) or Standard (false)."""
    network: pulumi.Input[str]
    """The VPC: a name or self link (GkeNetwork's `network_self_link`)."""
    subnetwork: pulumi.Input[str]
    """The subnet: a name or self link (GkeNetwork's `subnetwork_self_link`)."""
    pods_range_name: pulumi.Input[str]
    """The subnet's secondary range for Pods."""
    services_range_name: pulumi.Input[str]
    """The subnet's secondary range for Services."""
    release_channel: NotRequired[ReleaseChannel]
    """The GKE release channel. Defaults to REGULAR."""
    minimum_version: NotRequired[str]
    """The control plane's minimum GKE version (1.33, 1.33.5 or 1.33.5-gke.1080000): the version a
    new cluster starts at; raising it upgrades the control plane, it is never downgraded. GKE still
    upgrades within the release channel unless `maintenance` holds it. Defaults to the channel's
    default version."""
    maintenance: NotRequired[Maintenance]
    """A daily maintenance window and maintenance exclusions. Defaults to none (GKE's own)."""
    private_nodes: NotRequired[bool]
    """Nodes without external IPs (egress through Cloud NAT). Defaults to true."""
    public_endpoint: NotRequired[bool]
    """False: the control plane's IP endpoint is private (reachable from the VPC only); true: public,
    limited to `authorized_networks` (open to any address when that is empty). The DNS endpoint is on
    either way. Defaults to false; false needs `private_nodes`."""
    authorized_networks: NotRequired[list[AuthorizedNetwork]]
    """Ranges allowed to reach the public IP endpoint (at most 50; 100 with a private one). Defaults
    to none."""
    binary_authorization: NotRequired[bool]
    """Enforce the project's Binary Authorization policy on the cluster's Pods. Defaults to false."""
    intranode_visibility: NotRequired[bool]
    """Standard only (Autopilot always has it): Pod-to-Pod traffic on one node goes through the VPC.
    Turning it on for an existing cluster restarts the control plane and every node. Defaults to
    false."""
    multi_networking: NotRequired[bool]
    """Standard only: GKE multi-networking, which GPUDirect node pools need for their extra NICs (with
    Dataplane V2, always on here). Treat it as fixed at creation: cluster-toolkit calls it immutable
    (the provider updates it in place; UNVERIFIED which is right). Defaults to false."""
    kubeconfig_endpoint: NotRequired[KubeconfigEndpoint]
    """The endpoint the kubeconfig and the Kubernetes provider use. Defaults to dns."""
    dns_endpoint_external: NotRequired[bool]
    """The DNS endpoint accepts requests from outside Google Cloud (IAM checks each); false: only from
    Google Cloud's networks. Defaults to true."""
    control_plane_global_access: NotRequired[bool]
    """The IP endpoint's private address is reachable from every region (GKE's control-plane global
    access), not only from the cluster's. Defaults to false."""
    secrets_encryption_key: NotRequired[str]
    """Encrypt Secrets at the application layer with this Cloud KMS key
    (`projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>`, in the cluster's location; GKE's service
    agent needs roles/cloudkms.cryptoKeyEncrypterDecrypter on it). Defaults to none."""
    rbac_security_group: NotRequired[str]
    """Google Groups for RBAC: `gke-security-groups@<your domain>`, whose nested Google Groups the
    cluster's RoleBindings may then name as `Group` subjects (authenticatorGroupsConfig.securityGroup;
    GKE "Configure Google Groups for RBAC"). Defaults to none (a Group subject names no Google group)."""
    deletion_protection: NotRequired[bool]
    """GKE refuses to delete the cluster while on. Defaults to true."""
    system_pool: NotRequired[SystemPool]
    """Standard only: the non-GPU pool for system Pods. Defaults to an e2-standard-4 pool of 1 to 3
    nodes on a Standard cluster."""
    managed_dcgm: NotRequired[bool]
    """GKE's managed DCGM metrics (installs DCGM and a ClusterPodMonitoring on GPU nodes). Defaults to
    true."""
    resource_labels: NotRequired[dict[str, str]]
    """GCP labels on the cluster (lowercase keys and values, at most 64). Defaults to none."""
    gcs_fuse_csi_driver: NotRequired[bool]
    """Standard only (Autopilot always has it): GKE's Cloud Storage FUSE CSI driver, which mounts
    buckets into Pods (InferenceService's model weights). An in-place update. Defaults to false."""
    lustre_csi_driver: NotRequired[bool]
    """GKE's Managed Lustre CSI driver (`lustre.csi.storage.gke.io`), which mounts existing Managed
    Lustre instances into Pods (TrainingData's Lustre volumes). Needs GKE 1.33.2-gke.1111000 or later
    (`minimum_version`). An in-place update. Defaults to false."""
    hpa_profile: NotRequired[HpaProfile]
    """GKE's Horizontal Pod Autoscaler profile: `performance` (more HPAs per cluster, faster metrics
    collection) or `none` (opted out). An in-place update. Defaults to unset: GKE's own."""
    auto_monitoring: NotRequired[bool]
    """Managed Prometheus' automatic application monitoring of the workloads GKE supports (scope ALL;
    false: NONE). An in-place update. Defaults to unset: GKE's own."""
    fleet_project: NotRequired[str]
    """Register the cluster in the fleet of this project as it is created (the provider's `fleet`
    block; an in-place update): the fleet's features and Connect Gateway reach it. Defaults to none."""
    gateway_api: NotRequired[bool]
    """GKE's Gateway API controller on its standard channel (`CHANNEL_STANDARD`), which serves
    Gateways and HTTPRoutes (InferenceGateway's). An in-place update. Defaults to false (left unset:
    GKE's own default)."""
    shielded_nodes: NotRequired[bool]
    """Standard only: Shielded GKE Nodes (`enableShieldedNodes`). False only for a cluster that runs
    bare-metal nodes (A4X Max, `a4x-maxgpu-4g-metal`), as cluster-toolkit's `examples/gke-a4x-max-bm`
    turns it off; the cluster then carries the label `gke-gpu-bare-metal-nodes: "true"`, which the
    policy pack's `node-shielded-vm` reads. Node pools keep Shielded VM's secure boot and integrity
    monitoring either way. Defaults to true."""


def _gcp_label_text(value: str, *, key: bool) -> str:
    """GCP labels: lowercase letters (international ones too), digits, '_' and '-', at most 63
    characters; a key starts with a letter."""
    allowed = all(c in "_-" or (c.isalnum() and not c.isupper()) for c in value)
    if not allowed or (key and not (value[:1].isalpha() and not value[:1].isupper())):
        what = "a GCP label key" if key else "a GCP label value"
        start = ", starting with a letter" if key else ""
        raise PydanticCustomError(
            "gcp_label",
            "expected {what}: lowercase letters, digits, '_' and '-'{start}",
            {"what": what, "start": start},
        )
    return value


GcpLabelKey = Annotated[str, Field(max_length=63), AfterValidator(partial(_gcp_label_text, key=True))]
GcpLabelValue = Annotated[str, Field(max_length=63), AfterValidator(partial(_gcp_label_text, key=False))]


class _GkeClusterPlace(ArgsModel):
    """The cluster's identity and its network: first in GkeCluster's args (and so in their problems)."""

    project: ProjectId
    name: ClusterName
    location: LocationName
    autopilot: bool
    network: Deferrable[Annotated[str, Field(max_length=200, pattern=NETWORK_REF)]]
    subnetwork: Deferrable[Annotated[str, Field(max_length=250, pattern=SUBNETWORK_REF)]]
    pods_range_name: Deferrable[GceName]
    services_range_name: Deferrable[GceName]


class GkeClusterSpec(GkeClusterSettings, _GkeClusterPlace):
    """GkeCluster's args as checked: its place, then the settings a stack file's cluster section has
    too (one model, read here by snake_case name), then what only a program sets."""

    multi_networking: bool = False
    managed_dcgm: bool = True
    resource_labels: Annotated[
        dict[GcpLabelKey, GcpLabelValue],
        Field(default_factory=dict, max_length=MAX_RESOURCE_LABELS),
    ]
    gcs_fuse_csi_driver: bool = False
    lustre_csi_driver: bool = False
    gateway_api: bool = False
    shielded_nodes: bool = True
    fleet_project: ProjectId | None = None


def cluster_rules(spec: GkeClusterSpec) -> list[str]:
    """What GKE (or the provider, too late) would refuse in a combination of args: the rules a stack
    file's cluster section gets too (cluster/rules.py), and a zone is no Autopilot location."""
    problems = Problems()
    names = KeyNames(camel=False)
    check_private_nodes(
        names, problems, private_nodes=spec.private_nodes, public_endpoint=spec.public_endpoint
    )
    if spec.autopilot and spec.multi_networking:
        problems.add(
            "multi_networking",
            "true is not allowed with autopilot: true (this component enables it on Standard clusters, "
            "for GPUDirect node pools)",
        )
    if spec.autopilot and spec.gcs_fuse_csi_driver:
        problems.add(
            "gcs_fuse_csi_driver",
            "true is not allowed with autopilot: true (Autopilot clusters always have the driver)",
        )
    if (
        spec.lustre_csi_driver
        and spec.minimum_version
        and below(spec.minimum_version, LUSTRE_CSI_MIN_VERSION)
    ):
        problems.add(
            "lustre_csi_driver",
            f"true needs minimum_version {LUSTRE_CSI_MIN_VERSION} or later (GKE's Managed Lustre CSI "
            f"driver); minimum_version is {spec.minimum_version}",
        )
    if spec.autopilot and not spec.shielded_nodes:
        problems.add(
            "shielded_nodes",
            "false is not allowed with autopilot: true (Autopilot nodes are always Shielded; only a "
            "Standard cluster of bare-metal nodes turns it off)",
        )
    if spec.autopilot and ZONE_PATTERN.fullmatch(spec.location):
        problems.add("location", f"{spec.location!r} is a zone; Autopilot clusters are regional")
    check_nodes(
        names,
        problems,
        autopilot=spec.autopilot,
        autopilot_key="autopilot: true",
        location=spec.location,
        system_pool=spec.system_pool,
        intranode_visibility_set="intranode_visibility" in spec.model_fields_set,
        gpu_series=load_catalog().gpu_series,
    )
    for i, entry in enumerate(spec.authorized_networks):
        network_of(entry.cidr_block, f"authorized_networks[{i}].cidr_block", problems)
    if spec.public_endpoint:
        check_public_endpoint_networks(len(spec.authorized_networks), "authorized_networks", problems)
    check_maintenance(names, problems, spec.maintenance)
    return problems.items
