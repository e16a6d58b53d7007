"""A secure-by-default GKE cluster (Autopilot or Standard) and the Kubernetes provider for it."""

import hashlib
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pulumi_gcp import container, projects, serviceaccount

from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.validation import pick
from .args import GkeClusterArgs, GkeClusterSpec, cluster_rules
from .boot_disks import system_disk_type
from .gke_managed import maintenance_policy, monitoring_components
from .hardening import CLOUD_PLATFORM_SCOPE, ClusterHardening, cluster_hardening, hardened_node_settings
from .kubeconfig_text import render_ip_kubeconfig, render_kubeconfig
from .model import SystemPoolConfig

# Google's least-privilege role for node service accounts: write logs and metrics, read
# monitoring config, nothing else (no Compute or Storage admin as the default compute account has).
# And serviceusage.serviceUsageConsumer, which image streaming needs (on in every GPU pool and every
# Autopilot cluster): GKE's "Use Image streaming" page, Requirements: "If the GKE nodes in the cluster
# don't use the default service account, you must make sure that the custom service account has the
# Service Usage Consumer (roles/serviceusage.serviceUsageConsumer) IAM role in the project that hosts
# the container image" (the images of the serving mirror are in the stack's project);
# roles/container.defaultNodeServiceAccount lacks serviceusage.services.use (its definition, vendored in
# components/data/iam_roles.json). terraform-google-kubernetes-engine grants it for the same reason
# (issue #2251, PR #2262; autogen/main/sa.tf.tmpl at bb176b21, for Autopilot or enable_gcfs).
NODE_SERVICE_ACCOUNT_ROLES = (
    "roles/container.defaultNodeServiceAccount",
    "roles/serviceusage.serviceUsageConsumer",
)
# The cluster label that says its Shielded GKE Nodes are off for bare-metal nodes (shielded_nodes);
# the policy pack's node-shielded-vm accepts the setting on a cluster that carries it.
BARE_METAL_LABEL = "gke-gpu-bare-metal-nodes"


# The provider's inputs as the helpers below build them, keyed by the resource's keyword arguments, so
# that a type checker sees each value the resource gets from `**`.
class NetworkInputs(TypedDict):
    """The cluster's network args: checked values, or the caller's Outputs."""

    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: pulumi.Input[str]
    services_range_name: pulumi.Input[str]


class ControlPlaneAccess(TypedDict, total=False):
    """container.Cluster's inputs that decide who reaches the control plane."""

    private_cluster_config: container.ClusterPrivateClusterConfigArgs
    control_plane_endpoints_config: container.ClusterControlPlaneEndpointsConfigArgs
    master_auth: container.ClusterMasterAuthArgs
    master_authorized_networks_config: container.ClusterMasterAuthorizedNetworksConfigArgs


class ClusterInputs(ControlPlaneAccess, ClusterHardening, total=False):
    """container.Cluster's inputs, but for its name and options."""

    name: str
    project: str
    location: str
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    networking_mode: str
    ip_allocation_policy: container.ClusterIpAllocationPolicyArgs
    release_channel: container.ClusterReleaseChannelArgs
    min_master_version: str | None
    maintenance_policy: container.ClusterMaintenancePolicyArgs | None
    monitoring_config: container.ClusterMonitoringConfigArgs
    pod_autoscaling: container.ClusterPodAutoscalingArgs | None
    deletion_protection: bool
    resource_labels: dict[str, str]
    binary_authorization: container.ClusterBinaryAuthorizationArgs
    enable_autopilot: bool
    cluster_autoscaling: container.ClusterClusterAutoscalingArgs
    remove_default_node_pool: bool
    initial_node_count: int
    enable_shielded_nodes: bool
    datapath_provider: str
    network_policy: container.ClusterNetworkPolicyArgs
    enable_intranode_visibility: bool
    enable_multi_networking: bool | None
    addons_config: container.ClusterAddonsConfigArgs | None
    gateway_api_config: container.ClusterGatewayApiConfigArgs | None
    fleet: container.ClusterFleetArgs | None
    workload_identity_config: container.ClusterWorkloadIdentityConfigArgs
    node_config: container.ClusterNodeConfigArgs


class GkeCluster(GkeGpuComponent[GkeClusterSpec]):
    """GKE cluster, its dedicated node service account, the system pool, and a Kubernetes provider.

    Secure defaults: a dedicated node service account with only
    ``roles/container.defaultNodeServiceAccount`` (never the default compute account), Workload
    Identity, Shielded nodes with secure boot, private nodes (no external IPs), a release channel,
    Managed Service for Prometheus, and deletion protection.

    Control plane access (a Private Service Connect control plane): the DNS-based endpoint is on
    and accepts traffic from anywhere, each request checked by IAM (``container.clusters.connect``)
    before Kubernetes RBAC; the IP endpoint is private unless ``public_endpoint`` (then limited to
    ``authorized_networks``); no client certificates are issued; Binary Authorization when asked.

    Standard clusters start with GKE's default pool removed and a separate ``system`` pool: GPU
    pools are separate NodePool resources, so a change to one never touches the cluster.

    Outputs for the next layers: ``kubeconfig`` (a secret; the DNS endpoint and
    ``gke-gcloud-auth-plugin``, so no credential is stored in it and it works with the IP endpoint
    closed) and ``provider``, a ``pulumi_kubernetes`` Provider built from it.
    """

    cluster_name: pulumi.Output[str]
    """The cluster's name."""
    location: pulumi.Output[str]
    """The cluster's region or zone."""
    endpoint: pulumi.Output[str]
    """The control plane's IP endpoint (private unless `public_endpoint`)."""
    dns_endpoint: pulumi.Output[str | None]
    """The control plane's DNS endpoint (gke-....gke.goog), checked by IAM."""
    ca_certificate: pulumi.Output[str]
    """The cluster's CA certificate, base64-encoded PEM (what a client of the IP endpoint trusts)."""
    kubeconfig: pulumi.Output[str]
    """A kubeconfig (secret) that authenticates with gke-gcloud-auth-plugin; no credential inside."""
    node_service_account_email: pulumi.Output[str]
    """The email of the nodes' dedicated service account."""
    fleet_membership: pulumi.Output[str]
    """With `fleet_project`: the cluster's fleet Membership
    (`//gkehub.googleapis.com/projects/<p>/locations/<l>/memberships/<id>`); empty otherwise."""

    _args_model = GkeClusterSpec
    _args_rules = staticmethod(cluster_rules)
    _args_by_name = True

    def __init__(
        self,
        name: str,
        /,
        args: GkeClusterArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.node_service_account = serviceaccount.Account(
            f"{name}-nodes",
            project=spec.project,
            account_id=node_service_account_id(spec.name),
            display_name=f"GKE nodes of {spec.name}",
            description="Least-privilege node service account (gke-gpu Pulumi program)",
            opts=child,
        )
        self.node_service_account_roles = [
            projects.IAMMember(
                f"{name}-nodes-{role.split('/')[-1]}",
                project=spec.project,
                role=role,
                member=self.node_service_account.member,
                opts=child,
            )
            for role in NODE_SERVICE_ACCOUNT_ROLES
        ]

        self.cluster = container.Cluster(
            f"{name}-cluster",
            **self._cluster_inputs(spec, network_inputs(spec, args)),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=self.node_service_account_roles,
                # Standard: node_config and initial_node_count describe GKE's default pool, which is
                # removed right after creation; both are ForceNew, so a later difference (the API
                # reports the removed pool differently) must never replace the cluster.
                ignore_changes=[] if spec.autopilot else ["nodeConfig", "initialNodeCount"],
            ),
        )

        self.system_pool: container.NodePool | None = None
        if not spec.autopilot:
            self.system_pool = self._system_pool(name, spec, spec.system_pool or SystemPoolConfig())

        self.cluster_name = self.cluster.name
        self.location = self.cluster.location
        self.endpoint = self.cluster.endpoint
        self.dns_endpoint = self.cluster.control_plane_endpoints_config.apply(_dns_endpoint)
        self.ca_certificate = self.cluster.master_auth.cluster_ca_certificate
        self.node_service_account_email = self.node_service_account.email
        self.fleet_membership = self.cluster.fleet.apply(
            lambda fleet: (fleet.membership or "") if fleet else ""
        )
        if spec.kubeconfig_endpoint == "dns":
            kubeconfig = pulumi.Output.all(self.cluster.name, self.dns_endpoint).apply(
                lambda values: render_kubeconfig(
                    project=spec.project, location=spec.location, name=values[0], dns_endpoint=values[1]
                )
            )
        else:
            kubeconfig = pulumi.Output.all(
                self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
            ).apply(
                lambda values: render_ip_kubeconfig(
                    project=spec.project,
                    location=spec.location,
                    name=values[0],
                    endpoint=values[1],
                    ca_certificate=values[2],
                )
            )
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        # A resource, not an output (the schema would reference the kubernetes package): Python callers
        # pass it to the Kubernetes layer's components.
        self.provider: k8s.Provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # HAZARD: without an identifier, pulumi-kubernetes takes a new kubeconfig server (the move
            # from the IP to the DNS endpoint) for a new cluster and replaces every Kubernetes object.
            # With a stable identifier, known at preview, a server change is a provider update. It must
            # be in state before the server changes: see docs/configuration.md "Upgrading an existing stack".
            cluster_identifier=f"gke/{spec.project}/{spec.location}/{spec.name}",
            # Apply conflicts with fields other managers own surface as errors, not silent takeovers.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                # Kubernetes objects wait for schedulable nodes on Standard clusters.
                depends_on=[self.system_pool] if self.system_pool else [],
            ),
        )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "location": self.location,
                "endpoint": self.endpoint,
                "dnsEndpoint": self.dns_endpoint,
                "caCertificate": self.ca_certificate,
                "kubeconfig": self.kubeconfig,
                "nodeServiceAccountEmail": self.node_service_account_email,
                "fleetMembership": self.fleet_membership,
            }
        )

    def _cluster_inputs(self, spec: GkeClusterSpec, network: NetworkInputs) -> ClusterInputs:
        inputs: ClusterInputs = {
            "name": spec.name,
            "project": spec.project,
            "location": spec.location,
            "network": network["network"],
            "subnetwork": network["subnetwork"],
            "networking_mode": "VPC_NATIVE",
            "ip_allocation_policy": container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=network["pods_range_name"],
                services_secondary_range_name=network["services_range_name"],
            ),
            "release_channel": container.ClusterReleaseChannelArgs(channel=spec.release_channel),
            # Versions and maintenance (cluster/maintenance.py, gke_managed.py): both in-place updates;
            # unset, GKE's own (the channel's default version, maintenance at any time).
            "min_master_version": spec.minimum_version,
            "maintenance_policy": maintenance_policy(spec.maintenance),
            **control_plane_access(spec),
            **cluster_hardening(spec),
            # The list replaces GKE's default set: GKE's defaults, DCGM added (gke_managed.py).
            "monitoring_config": container.ClusterMonitoringConfigArgs(
                enable_components=monitoring_components(
                    managed_dcgm=spec.managed_dcgm, minimum_version=spec.minimum_version
                ),
                managed_prometheus=container.ClusterMonitoringConfigManagedPrometheusArgs(
                    enabled=True,
                    # Unset: GKE's own (the provider's Optional+Computed block keeps a preview clean).
                    auto_monitoring_config=None
                    if spec.auto_monitoring is None
                    else container.ClusterMonitoringConfigManagedPrometheusAutoMonitoringConfigArgs(
                        scope="ALL" if spec.auto_monitoring else "NONE"
                    ),
                ),
            ),
            # GKE's HPA profile, an in-place update; unset: GKE's own (its default profile for new
            # clusters reads back through the provider's Optional+Computed block, so no diff).
            "pod_autoscaling": container.ClusterPodAutoscalingArgs(hpa_profile=spec.hpa_profile.upper())
            if spec.hpa_profile
            else None,
            "deletion_protection": spec.deletion_protection,
            "resource_labels": dict(spec.resource_labels)
            | ({BARE_METAL_LABEL: "true"} if not spec.shielded_nodes else {}),
            # Declared either way, so turning it off again really sends DISABLED. An in-place update.
            "binary_authorization": container.ClusterBinaryAuthorizationArgs(
                evaluation_mode="PROJECT_SINGLETON_POLICY_ENFORCE"
                if spec.binary_authorization
                else "DISABLED"
            ),
            # Gateways and HTTPRoutes (an in-place update: the API's desiredGatewayApiConfig). Left
            # unset when off, so clusters created before it existed see no diff.
            "gateway_api_config": container.ClusterGatewayApiConfigArgs(channel="CHANNEL_STANDARD")
            if spec.gateway_api
            else None,
            # Born in the fleet (GKE "Fleet membership"); unset when off, so no diff for other clusters.
            "fleet": container.ClusterFleetArgs(project=spec.fleet_project) if spec.fleet_project else None,
        }
        if spec.autopilot:
            # Autopilot always runs Workload Identity and Shielded nodes; it only needs to know
            # which service account its nodes use.
            inputs["enable_autopilot"] = True
            inputs["addons_config"] = addons(spec)
            inputs["cluster_autoscaling"] = container.ClusterClusterAutoscalingArgs(
                auto_provisioning_defaults=container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
                    service_account=self.node_service_account.email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                ),
            )
            return inputs
        inputs.update(
            {
                "remove_default_node_pool": True,
                "initial_node_count": 1,
                # Off only for bare-metal nodes (A4X Max), as cluster-toolkit's examples/gke-a4x-max-bm
                # (cluster/args.py, shielded_nodes). Changing it is an in-place update of the cluster.
                "enable_shielded_nodes": spec.shielded_nodes,
                # Dataplane V2 (eBPF): enforces Kubernetes NetworkPolicy and logs network policy
                # decisions; Autopilot always has it. Only settable at creation (ForceNew).
                "datapath_provider": "ADVANCED_DATAPATH",
                # Calico off, written out: Dataplane V2 is the NetworkPolicy enforcer (GKE refuses
                # both). What the provider stores for a cluster without the block, so no change for
                # existing ones.
                "network_policy": container.ClusterNetworkPolicyArgs(enabled=False),
                # Pod-to-Pod traffic on one node goes through the VPC too, so the subnet's flow logs and
                # firewall rules see it (Autopilot's default; the provider refuses the field there).
                # HAZARD: switching it on for an existing cluster restarts the control plane and nodes.
                "enable_intranode_visibility": spec.intranode_visibility,
                # Extra Pod interfaces on the GPUDirect NICs (Networks and GKENetworkParamSets). Left
                # unset when off, so clusters created before it existed see no diff.
                "enable_multi_networking": True if spec.multi_networking else None,
                "addons_config": addons(spec),
                "workload_identity_config": container.ClusterWorkloadIdentityConfigArgs(
                    workload_pool=f"{spec.project}.svc.id.goog"
                ),
                # The default pool lives for a minute; it still must not use the default compute
                # account.
                "node_config": container.ClusterNodeConfigArgs(
                    service_account=self.node_service_account.email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                    shielded_instance_config=container.ClusterNodeConfigShieldedInstanceConfigArgs(
                        enable_secure_boot=True, enable_integrity_monitoring=True
                    ),
                    workload_metadata_config=container.ClusterNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA"
                    ),
                ),
            }
        )
        return inputs

    def _system_pool(self, name: str, spec: GkeClusterSpec, pool: SystemPoolConfig) -> "container.NodePool":
        return container.NodePool(
            f"{name}-system",
            name="system",
            project=spec.project,
            location=spec.location,
            cluster=self.cluster.name,
            initial_node_count=1,
            autoscaling=container.NodePoolAutoscalingArgs(
                total_min_node_count=pool.min_nodes,
                total_max_node_count=pool.max_nodes,
                location_policy="BALANCED",
            ),
            management=container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            upgrade_settings=container.NodePoolUpgradeSettingsArgs(max_surge=1, max_unavailable=0),
            node_config=container.NodePoolNodeConfigArgs(
                machine_type=pool.machine_type,
                image_type="COS_CONTAINERD",
                disk_size_gb=pool.disk_size_gb,
                disk_type=system_disk_type(pool.machine_type, pool.disk_type),
                spot=pool.spot,
                labels={"gke-gpu/role": "system"},
                **hardened_node_settings(self.node_service_account.email),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                # initial_node_count is ForceNew and only matters at creation: never replace for it.
                ignore_changes=["initialNodeCount"],
            ),
        )


def addons(spec: GkeClusterSpec) -> container.ClusterAddonsConfigArgs | None:
    """The CSI drivers the cluster's workloads mount volumes with: buckets (model weights, training
    data; Autopilot always has that driver) and Managed Lustre instances. Each left unset when off, and
    the whole block when both are, so clusters created before either existed see no diff."""
    if not spec.gcs_fuse_csi_driver and not spec.lustre_csi_driver:
        return None
    return container.ClusterAddonsConfigArgs(
        gcs_fuse_csi_driver_config=container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)
        if spec.gcs_fuse_csi_driver
        else None,
        lustre_csi_driver_config=container.ClusterAddonsConfigLustreCsiDriverConfigArgs(enabled=True)
        if spec.lustre_csi_driver
        else None,
    )


def network_inputs(spec: GkeClusterSpec, args: GkeClusterArgs) -> NetworkInputs:
    """The network args as the cluster takes them: checked values, or the caller's Outputs."""
    return {
        "network": pick(spec.network, args["network"]),
        "subnetwork": pick(spec.subnetwork, args["subnetwork"]),
        "pods_range_name": pick(spec.pods_range_name, args["pods_range_name"]),
        "services_range_name": pick(spec.services_range_name, args["services_range_name"]),
    }


def control_plane_access(spec: GkeClusterSpec) -> ControlPlaneAccess:
    """Cluster inputs that decide who reaches the control plane, and how. Every one is an in-place
    update of an existing cluster (terraform-provider-google: none is ForceNew except
    ``client_certificate_config``, whose value, false, is what the state of a cluster created
    without client certificates already holds)."""
    access: ControlPlaneAccess = {
        # No master_ipv4_cidr_block: new clusters get a Private Service Connect control plane.
        # enable_private_endpoint turns the IP endpoint's public address off (the API's
        # controlPlaneEndpointsConfig.ipEndpointsConfig.enablePublicEndpoint, negated); the
        # private address stays, for the nodes and anything in the VPC.
        "private_cluster_config": container.ClusterPrivateClusterConfigArgs(
            enable_private_nodes=spec.private_nodes,
            enable_private_endpoint=not spec.public_endpoint,
            # Set only when on: a cluster created without it keeps its inputs unchanged.
            master_global_access_config=container.ClusterPrivateClusterConfigMasterGlobalAccessConfigArgs(
                enabled=True
            )
            if spec.control_plane_global_access
            else None,
        ),
        # The DNS endpoint: every request authorised by IAM first, so CI and people reach the cluster
        # without an IP allowlist (the kubeconfig uses it); from anywhere unless dns_endpoint_external.
        "control_plane_endpoints_config": container.ClusterControlPlaneEndpointsConfigArgs(
            dns_endpoint_config=container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                allow_external_traffic=spec.dns_endpoint_external
            ),
        ),
        # Never issue a client certificate (a credential that cannot be revoked short of rotating
        # the cluster CA); GKE has not by default since 1.12.
        "master_auth": container.ClusterMasterAuthArgs(
            client_certificate_config=container.ClusterMasterAuthClientCertificateConfigArgs(
                issue_client_certificate=False
            ),
        ),
    }
    # Authorized networks on, with only the listed ranges and no Google Cloud public IPs: they
    # restrict the public IP endpoint. Not enforced on the private IP endpoint (the provider's
    # private_endpoint_enforcement_enabled defaults to false; whether nodes keep reaching the control
    # plane with it on is unverified here), so anything that routes into the VPC reaches that.
    # Left out only for a public endpoint open to any address (no list), which the settings refuse
    # unless the stack sets cluster.publicEndpointOpenToInternet. The block is Optional+Computed:
    # leaving it out keeps an earlier allowlist in place rather than removing it.
    if spec.authorized_networks or not spec.public_endpoint:
        access["master_authorized_networks_config"] = container.ClusterMasterAuthorizedNetworksConfigArgs(
            # None, not []: the provider's way to say "no external range at all".
            cidr_blocks=[
                container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block=n.cidr_block, display_name=n.display_name or n.cidr_block
                )
                for n in spec.authorized_networks
            ]
            or None,
            gcp_public_cidrs_access_enabled=False,
        )
    return access


def _dns_endpoint(config: "container.outputs.ClusterControlPlaneEndpointsConfig | None") -> str | None:
    dns = config.dns_endpoint_config if config else None
    return dns.endpoint if dns else None


def node_service_account_id(cluster_name: str) -> str:
    """A service account ID (6-30 chars) derived from the cluster name; a name too long to fit keeps a
    short hash of the full name, so two clusters of one project never share an account."""
    if len(cluster_name) <= 24:
        return f"{cluster_name}-nodes"
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:4]
    return f"{cluster_name[:19].rstrip('-')}-{digest}-nodes"
