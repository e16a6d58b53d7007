"""How the manager's Kueue reaches the workers of a GKE fleet with no credential stored anywhere.

Google's sample (GoogleCloudPlatform/gke-fleet-management@dbf58b5e, `multikueue-clusterprofile/`,
G@ below) and Kueue v0.19.2 (kubernetes-sigs/kueue@8eab6877, K@):

* every cluster is a member of the fleet (G@ 1-infrastructure/main.tf:44-46, 83-85, the cluster's
  `fleet { project }`); the manager is the fleet's hub: its labels turn on GKE's ClusterProfile sync,
  which keeps a ClusterProfile per member in `kueue-system` (G@ main.tf:52-55; GKE "Generate an
  inventory for third-party integrations");
* Kueue's MultiKueueCluster points at a worker's ClusterProfile (`clusterSource.clusterProfileRef`, K@
  apis/kueue/v1beta2/multikueue_types.go:82-90) with the alpha feature gate `MultiKueueClusterProfile`
  on (K@ pkg/features/kube_features.go:790-792; without it, `MultiKueueClusterProfileFeatureDisabled`,
  K@ pkg/controller/admissionchecks/multikueue/multikueuecluster.go:927-930);
* Kueue builds its client from the ClusterProfile's access provider by running the executable its
  Configuration names for that provider (`multiKueue.clusterProfile.accessProviders`, K@
  apis/config/v1beta2/configuration_types.go:499-523; exec plugins allowed for ClusterProfiles only,
  multikueuecluster.go:935-938): Google's `gcp-auth-plugin` (G@ gcp-auth-plugin/cmd/main.go), which
  hands it a Google access token of Kueue's Workload Identity (G@ 2-multikueue/modules/kueue/
  controller-manager-config.yaml:26-35); an init container copies it into Kueue's Pod (G@
  kueue-patches/patch.yaml; K@ site/content/en/docs/tasks/manage/setup_multikueue.md:287-319);
* Kueue's identity gets Connect Gateway's roles on the project (G@ main.tf:62-73).

Here Kueue's identity is a Google service account of its own that only Kueue's Kubernetes account
may act as, with `roles/gkehub.gatewayEditor` (the sample's) and `roles/container.clusterViewer` (to
authenticate to GKE) instead of the sample's `roles/container.developer`, which lets it change any
Kubernetes object of any cluster in the project: what it may do on a worker is Kubernetes RBAC,
namespaced where Kueue allows it (worker_access.py). Whether Connect Gateway applies RBAC bound to the
service account's email with clusterViewer alone is UNVERIFIED on a running fleet (docs/fleet.md).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_gcp import projects, serviceaccount

from ..core.k8s import restricted_container_security_patch
from ..workloads.training_data import GCP_SERVICE_ACCOUNT_ANNOTATION
from .model import KUEUE_NAMESPACE

# The access provider GKE's ClusterProfile sync names in each ClusterProfile's status: the name Google's
# sample gives Kueue's provider (G@ controller-manager-config.yaml:31). UNVERIFIED in GKE's own pages.
ACCESS_PROVIDER = "google"
PLUGIN_VOLUME = "clusterprofile-plugins"
PLUGIN_DIR = "/plugins"
# The plugin image's executable (G@ gcp-auth-plugin/Dockerfile:19) and where Kueue runs it.
PLUGIN_SOURCE = "/gcp-auth-plugin"
PLUGIN_COMMAND = f"{PLUGIN_DIR}/gcp-auth-plugin"
FEATURE_GATE = "MultiKueueClusterProfile"
# GKE's ClusterProfile sync: on the hub cluster (the manager), into Kueue's namespace (G@ main.tf:52-55).
HUB_LABELS = {
    "fleet-clusterinventory-management-cluster": "true",
    "fleet-clusterinventory-namespace": KUEUE_NAMESPACE,
}
GATEWAY_ROLES = ("roles/gkehub.gatewayEditor", "roles/container.clusterViewer")
# A fleet Membership's name, as the provider reports a cluster's (pulumi_gcp 10.2.0 ClusterFleet.membership).
MEMBERSHIP = r"^//gkehub\.googleapis\.com/projects/[^/]+/locations/[a-z0-9-]+/memberships/[a-z0-9-]+$"


def access_configuration() -> dict[str, Any]:
    """Kueue's Configuration `multiKueue.clusterProfile`: the plugin for the sync's access provider."""
    return {
        "clusterProfile": {
            "accessProviders": [
                {
                    "name": ACCESS_PROVIDER,
                    "execConfig": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": PLUGIN_COMMAND,
                        "interactiveMode": "Never",
                    },
                }
            ]
        }
    }


def cluster_profile_name(membership: str | None) -> str:
    """The ClusterProfile GKE's fleet keeps for a member: `<membership id>-<membership location>`, as
    Google's sample refers to its workers' (G@ multikueue-setup.yaml:54-79, clusters `multikueue-worker`
    in three regions: regional clusters, whose location is their Membership's). Google's older script
    syncer (fleet-clusterprofile-syncer/membership-to-clusterprofile.sh:29-43, 72) uses the cluster's
    location (`monitoringConfig.location`), a zone for a zonal cluster, and is not GKE's sync: for a
    zonal worker the name is UNVERIFIED (docs/fleet.md, "A worker's ClusterProfile name"), as it is in
    GKE's own pages."""
    parts = (membership or "").split("/")
    if len(parts) < 4 or parts[-2] != "memberships":
        return ""
    return f"{parts[-1]}-{parts[-3]}"


def kueue_fullname(release: str) -> str:
    """The Kueue chart's `kueue.fullname` for a Helm release (K@ charts/kueue/templates/_helpers.tpl:29-40;
    a Pulumi helm.v4.Chart's release is its resource name, pulumi/pulumi-kubernetes@5da82fe0
    provider/pkg/provider/helm/v4/chart.go): its controller's Deployment and ServiceAccount are
    `<fullname>-controller-manager`."""
    name = release if "kueue" in release else f"{release}-kueue"
    return name[:63].rstrip("-")


def manager_account_id(cluster_name: str) -> str:
    """The manager's Kueue's Google service account id (6-30 characters), one per manager cluster."""
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:6]
    return f"mk-{cluster_name[:19].rstrip('-')}-{digest}"


def declare_fleet_access(
    parent: pulumi.Resource,
    name: str,
    *,
    project: str,
    cluster_name: str,
    plugin_image: str,
    release: str,
    after_charts: pulumi.ResourceOptions,
) -> serviceaccount.Account:
    """Kueue's Google service account with Connect Gateway's roles, Kueue's Kubernetes account as the one
    that may act as it, and Kueue's Deployment given the plugin (server-side apply patches of those
    fields only; the chart has no value for them). Returns the account."""
    child = pulumi.ResourceOptions(parent=parent)
    controller = f"{kueue_fullname(release)}-controller-manager"
    account = serviceaccount.Account(
        f"{name}-kueue-identity",
        project=project,
        account_id=manager_account_id(cluster_name),
        display_name=f"MultiKueue of {cluster_name}"[:100],
        description="Kueue's MultiKueue controller: reaches the fleet's workers through Connect Gateway",
        opts=child,
    )
    grants: list[pulumi.Resource] = [
        projects.IAMMember(
            f"{name}-kueue-{role.split('/')[-1].replace('.', '-')}",
            project=project,
            role=role,
            member=account.member,
            opts=child,
        )
        for role in GATEWAY_ROLES
    ]
    grants.append(
        serviceaccount.IAMMember(
            f"{name}-kueue-workload-identity",
            service_account_id=account.name,
            role="roles/iam.workloadIdentityUser",
            member=f"serviceAccount:{project}.svc.id.goog[{KUEUE_NAMESPACE}/{controller}]",
            opts=child,
        )
    )
    identity = k8s.core.v1.ServiceAccountPatch(
        f"{name}-kueue-identity-annotation",
        metadata=k8s.meta.v1.ObjectMetaPatchArgs(
            name=controller,
            namespace=KUEUE_NAMESPACE,
            annotations={GCP_SERVICE_ACCOUNT_ANNOTATION: account.email},
        ),
        opts=pulumi.ResourceOptions.merge(after_charts, pulumi.ResourceOptions(depends_on=grants)),
    )
    k8s.apps.v1.DeploymentPatch(
        f"{name}-kueue-credentials-plugin",
        metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=controller, namespace=KUEUE_NAMESPACE),
        spec=k8s.apps.v1.DeploymentSpecPatchArgs(
            template=k8s.core.v1.PodTemplateSpecPatchArgs(
                spec=k8s.core.v1.PodSpecPatchArgs(
                    init_containers=[_plugin_copier(plugin_image)],
                    containers=[
                        k8s.core.v1.ContainerPatchArgs(
                            name="manager",
                            volume_mounts=[
                                k8s.core.v1.VolumeMountPatchArgs(
                                    name=PLUGIN_VOLUME, mount_path=PLUGIN_DIR, read_only=True
                                )
                            ],
                        )
                    ],
                    volumes=[
                        k8s.core.v1.VolumePatchArgs(
                            name=PLUGIN_VOLUME,
                            empty_dir=k8s.core.v1.EmptyDirVolumeSourcePatchArgs(size_limit="64Mi"),
                        )
                    ],
                )
            )
        ),
        opts=pulumi.ResourceOptions.merge(after_charts, pulumi.ResourceOptions(depends_on=[identity])),
    )
    return account


def _plugin_copier(image: str) -> k8s.core.v1.ContainerPatchArgs:
    """The init container that copies the plugin into the volume Kueue's container runs it from (G@
    kueue-patches/patch.yaml:12-21), as the image's own non-root user with nothing else."""
    return k8s.core.v1.ContainerPatchArgs(
        name="add-plugins",
        image=image,
        command=["cp"],
        args=[PLUGIN_SOURCE, PLUGIN_COMMAND],
        volume_mounts=[k8s.core.v1.VolumeMountPatchArgs(name=PLUGIN_VOLUME, mount_path=PLUGIN_DIR)],
        security_context=restricted_container_security_patch(),
        resources=k8s.core.v1.ResourceRequirementsPatchArgs(
            requests={"cpu": "10m", "memory": "16Mi"}, limits={"cpu": "100m", "memory": "64Mi"}
        ),
    )
