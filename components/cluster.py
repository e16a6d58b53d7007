"""A secure-by-default GKE cluster (Autopilot or Standard) and the Kubernetes provider for it."""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s
from pulumi_gcp import container, projects, serviceaccount

from components.config import AuthorizedNetwork, SystemPool

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Google's least-privilege role for node service accounts: write logs and metrics, read
# monitoring config, nothing else (no Compute or Storage admin as the default compute account has).
NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount",)


@dataclass(frozen=True, kw_only=True)
class GkeClusterArgs:
    project: str
    name: str
    # The region (regional cluster) or one of its zones (zonal, Standard only).
    location: str
    autopilot: bool
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: pulumi.Input[str]
    services_range_name: pulumi.Input[str]
    release_channel: str = "REGULAR"
    private_nodes: bool = True
    authorized_networks: Sequence[AuthorizedNetwork] = ()
    deletion_protection: bool = True
    # Standard only: the small non-GPU pool for system Pods.
    system_pool: SystemPool | None = None
    # GKE's managed DCGM metrics (installs DCGM and a ClusterPodMonitoring).
    managed_dcgm: bool = True
    resource_labels: Mapping[str, str] = field(default_factory=dict)


class GkeCluster(pulumi.ComponentResource):
    """GKE cluster, its dedicated node service account, the system pool, and a Kubernetes provider.

    Secure defaults: a dedicated node service account with only
    ``roles/container.defaultNodeServiceAccount`` (never the default compute account), Workload
    Identity, Shielded nodes with secure boot, private nodes (no external IPs; a Private Service
    Connect control plane with a public endpoint restricted to ``authorized_networks`` when given),
    a release channel, Managed Service for Prometheus, and deletion protection.

    Standard clusters start with GKE's default pool removed and a separate ``system`` pool: GPU
    pools are separate NodePool resources, so a change to one never touches the cluster.

    Outputs for the next layers: ``kubeconfig`` (a secret; uses ``gke-gcloud-auth-plugin``, so no
    credential is stored in it) and ``provider``, a ``pulumi_kubernetes`` Provider built from it.
    """

    cluster_name: pulumi.Output[str]
    location: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    node_service_account_email: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-gpu:cluster:GkeCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.node_service_account = serviceaccount.Account(
            f"{name}-nodes",
            project=args.project,
            account_id=node_service_account_id(args.name),
            display_name=f"GKE nodes of {args.name}",
            description="Least-privilege node service account (gke-gpu Pulumi program)",
            opts=child,
        )
        self.node_service_account_roles = [
            projects.IAMMember(
                f"{name}-nodes-{role.split('/')[-1]}",
                project=args.project,
                role=role,
                member=self.node_service_account.member,
                opts=child,
            )
            for role in NODE_SERVICE_ACCOUNT_ROLES
        ]

        self.cluster = container.Cluster(
            f"{name}-cluster",
            **self._cluster_inputs(args),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=self.node_service_account_roles,
                # Standard: node_config and initial_node_count describe GKE's default pool, which is
                # removed right after creation; both are ForceNew, so a later difference (the API
                # reports the removed pool differently) must never replace the cluster.
                ignore_changes=[] if args.autopilot else ["nodeConfig", "initialNodeCount"],
            ),
        )

        self.system_pool: container.NodePool | None = None
        if not args.autopilot:
            assert args.system_pool is not None, "Standard clusters need a system pool"
            self.system_pool = self._system_pool(name, args, args.system_pool)

        self.cluster_name = self.cluster.name
        self.location = self.cluster.location
        self.endpoint = self.cluster.endpoint
        self.node_service_account_email = self.node_service_account.email
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.name,
                self.cluster.endpoint,
                self.cluster.master_auth.cluster_ca_certificate,
            ).apply(
                lambda values: render_kubeconfig(
                    project=args.project,
                    location=args.location,
                    name=values[0],
                    endpoint=values[1],
                    ca_certificate=values[2],
                )
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
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
                "kubeconfig": self.kubeconfig,
                "nodeServiceAccount": self.node_service_account_email,
            }
        )

    def _cluster_inputs(self, args: GkeClusterArgs) -> dict[str, object]:
        components = ["SYSTEM_COMPONENTS"]
        if args.managed_dcgm:
            components.append("DCGM")
        inputs: dict[str, object] = {
            "name": args.name,
            "project": args.project,
            "location": args.location,
            "network": args.network,
            "subnetwork": args.subnetwork,
            "networking_mode": "VPC_NATIVE",
            "ip_allocation_policy": container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=args.pods_range_name,
                services_secondary_range_name=args.services_range_name,
            ),
            "release_channel": container.ClusterReleaseChannelArgs(channel=args.release_channel),
            # No master_ipv4_cidr_block: new clusters get a Private Service Connect control plane.
            "private_cluster_config": container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=args.private_nodes,
                enable_private_endpoint=False,
            ),
            # The list replaces GKE's default set, so SYSTEM_COMPONENTS must stay in it. Without
            # DCGM here, clusters created on 1.32.1-gke.1357000+ would otherwise get it by default.
            "monitoring_config": container.ClusterMonitoringConfigArgs(
                enable_components=components,
                managed_prometheus=container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
            ),
            "deletion_protection": args.deletion_protection,
            "resource_labels": dict(args.resource_labels),
        }
        if args.authorized_networks:
            inputs["master_authorized_networks_config"] = container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=n.cidr_block, display_name=n.display_name
                    )
                    for n in args.authorized_networks
                ],
                gcp_public_cidrs_access_enabled=False,
            )
        if args.autopilot:
            # Autopilot always runs Workload Identity and Shielded nodes; it only needs to know
            # which service account its nodes use.
            inputs["enable_autopilot"] = True
            inputs["cluster_autoscaling"] = container.ClusterClusterAutoscalingArgs(
                auto_provisioning_defaults=container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
                    service_account=self.node_service_account.email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                ),
            )
            return inputs
        inputs.update(
            remove_default_node_pool=True,
            initial_node_count=1,
            enable_shielded_nodes=True,
            # Dataplane V2 (eBPF): enforces Kubernetes NetworkPolicy and logs network policy
            # decisions; Autopilot always has it. Only settable at creation (ForceNew).
            datapath_provider="ADVANCED_DATAPATH",
            workload_identity_config=container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{args.project}.svc.id.goog"
            ),
            # The default pool lives for a minute; it still must not use the default compute account.
            node_config=container.ClusterNodeConfigArgs(
                service_account=self.node_service_account.email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                shielded_instance_config=container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
                workload_metadata_config=container.ClusterNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
            ),
        )
        return inputs

    def _system_pool(self, name: str, args: GkeClusterArgs, pool: SystemPool) -> container.NodePool:
        return container.NodePool(
            f"{name}-system",
            name="system",
            project=args.project,
            location=args.location,
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
                disk_type="pd-balanced",
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


def hardened_node_settings(service_account_email: pulumi.Input[str]) -> dict[str, object]:
    """NodePoolNodeConfigArgs fields every node pool shares: the dedicated service account (its
    IAM roles, not OAuth scopes, limit it), Workload Identity metadata (Pods never see the node's
    credentials), Shielded VM with secure boot (GKE's GPU drivers are signed) and the legacy
    metadata endpoints off. All but the workload metadata mode are ForceNew: changing one
    recreates the pool."""
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
    }


def node_service_account_id(cluster_name: str) -> str:
    """A service account ID (6-30 chars) derived from the cluster name; a name too long to fit keeps a
    short hash of the full name, so two clusters of one project never share an account."""
    if len(cluster_name) <= 24:
        return f"{cluster_name}-nodes"
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:4]
    return f"{cluster_name[:19].rstrip('-')}-{digest}-nodes"


def render_kubeconfig(
    *, project: str, location: str, name: str, endpoint: str | None, ca_certificate: str | None
) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin (no credential inside)."""
    context = f"gke_{project}_{location}_{name}"
    return textwrap.dedent(
        f"""\
        apiVersion: v1
        kind: Config
        clusters:
        - name: {context}
          cluster:
            server: https://{endpoint}
            certificate-authority-data: {ca_certificate}
        contexts:
        - name: {context}
          context:
            cluster: {context}
            user: {context}
        current-context: {context}
        users:
        - name: {context}
          user:
            exec:
              apiVersion: client.authentication.k8s.io/v1beta1
              command: gke-gcloud-auth-plugin
              installHint: Install gke-gcloud-auth-plugin, see https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
              provideClusterInfo: true
        """
    )
