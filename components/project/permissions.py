"""The IAM permissions each resource type's API calls need: for `pulumi up` (create, read, update,
delete) and for a read-only `pulumi preview` (what a refresh reads). Each list is the methods' own
"Authorization requires" permissions as Google's REST references state them, taken from
iann0036/iam-dataset@2073fa52 (2026-08-22) gcp/map.json, which collects those references per method
(docs/preflight.md lists the methods)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

SOURCE = "iann0036/iam-dataset@2073fa52 gcp/map.json (Google's REST references, per method)"


class TypePermissions(NamedTuple):
    up: tuple[str, ...]
    """Create, read, update and delete (the methods insert/create, get, patch/update, delete and the
    operation polls)."""
    preview: tuple[str, ...]
    """What reading the resource back needs (get; getIamPolicy for an IAM member)."""
    scope: str = "project"
    """Where the permissions must be granted: the stack's project, or the bucket the resource names."""


def _crud(prefix: str, *, update: bool = True, operations: tuple[str, ...] = ()) -> TypePermissions:
    verbs = ("create", "get", "update", "delete") if update else ("create", "get", "delete")
    return TypePermissions(up=(*(f"{prefix}.{v}" for v in verbs), *operations), preview=(f"{prefix}.get",))


_REGION_OP = ("compute.regionOperations.get",)
_GLOBAL_OP = ("compute.globalOperations.get",)
_IAM_POLICY = ("getIamPolicy", "setIamPolicy")

TYPE_PERMISSIONS: dict[str, TypePermissions] = {
    "gcp:compute/network:Network": _crud("compute.networks", operations=_GLOBAL_OP),
    "gcp:compute/subnetwork:Subnetwork": _crud("compute.subnetworks", operations=_REGION_OP),
    "gcp:compute/router:Router": _crud("compute.routers", operations=_REGION_OP),
    # A NAT is a part of its router: routers.patch.
    "gcp:compute/routerNat:RouterNat": TypePermissions(
        up=("compute.routers.get", "compute.routers.update", *_REGION_OP), preview=("compute.routers.get",)
    ),
    # firewalls.insert/patch/delete also need compute.networks.updatePolicy on the network.
    "gcp:compute/firewall:Firewall": TypePermissions(
        up=(*_crud("compute.firewalls").up, "compute.networks.updatePolicy", *_GLOBAL_OP),
        preview=("compute.firewalls.get",),
    ),
    "gcp:compute/networkPeering:NetworkPeering": TypePermissions(
        up=(
            "compute.networks.addPeering",
            "compute.networks.removePeering",
            "compute.networks.updatePeering",
            "compute.networks.get",
            *_GLOBAL_OP,
        ),
        preview=("compute.networks.get",),
    ),
    "gcp:compute/resourcePolicy:ResourcePolicy": _crud("compute.resourcePolicies", operations=_REGION_OP),
    # Node pools are the cluster's: nodePools.create/update/delete need container.clusters.update.
    # Setting the node service account needs iam.serviceAccounts.actAs on it (roles/container.admin's
    # description: "To set a service account on nodes, you must also have the Service Account User
    # role").
    "gcp:container/cluster:Cluster": TypePermissions(
        up=(*_crud("container.clusters").up, "container.operations.get", "iam.serviceAccounts.actAs"),
        preview=("container.clusters.get",),
    ),
    "gcp:container/nodePool:NodePool": TypePermissions(
        up=(
            "container.clusters.get",
            "container.clusters.update",
            "container.operations.get",
            "iam.serviceAccounts.actAs",
        ),
        preview=("container.clusters.get",),
    ),
    "gcp:serviceaccount/account:Account": _crud("iam.serviceAccounts"),
    "gcp:serviceaccount/iAMMember:IAMMember": TypePermissions(
        up=tuple(f"iam.serviceAccounts.{v}" for v in _IAM_POLICY),
        preview=("iam.serviceAccounts.getIamPolicy",),
    ),
    "gcp:projects/iAMMember:IAMMember": TypePermissions(
        up=tuple(f"resourcemanager.projects.{v}" for v in _IAM_POLICY),
        preview=("resourcemanager.projects.getIamPolicy",),
    ),
    # A projects.Service on an enabled API only lists the services (the provider reads them first:
    # hashicorp/terraform-provider-google@fa4a3b00 resource_google_project_service.go); enabling one
    # needs serviceusage.services.enable.
    "gcp:projects/service:Service": TypePermissions(
        up=("serviceusage.services.enable", "serviceusage.services.get", "serviceusage.services.list"),
        preview=("serviceusage.services.list",),
    ),
    "gcp:storage/bucketIAMMember:BucketIAMMember": TypePermissions(
        up=("storage.buckets.get", *(f"storage.buckets.{v}" for v in _IAM_POLICY)),
        preview=("storage.buckets.getIamPolicy",),
        scope="bucket",
    ),
    "gcp:artifactregistry/repository:Repository": _crud("artifactregistry.repositories"),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": TypePermissions(
        up=tuple(f"artifactregistry.repositories.{v}" for v in _IAM_POLICY),
        preview=("artifactregistry.repositories.getIamPolicy",),
    ),
    "gcp:monitoring/dashboard:Dashboard": _crud("monitoring.dashboards"),
    "gcp:monitoring/alertPolicy:AlertPolicy": _crud("monitoring.alertPolicies"),
}

# Kubernetes objects go through the cluster's DNS endpoint, which checks IAM first
# (container.clusters.connect), then Kubernetes authorizes the object by IAM's container.* permissions
# and RBAC. The program creates cluster-wide RBAC, CRDs and admission policies, so the deployer needs
# IAM's full container.* set (roles/container.admin, "Full management of Kubernetes Clusters and their
# Kubernetes API objects"); the preview reads them (roles/container.viewer) and, with server-side
# apply, may need write access for its dry run (docs/ci.md).
KUBERNETES_PERMISSIONS = TypePermissions(
    up=("container.clusters.get", "container.clusters.connect", "container.thirdPartyObjects.create"),
    preview=("container.clusters.get", "container.clusters.connect", "container.thirdPartyObjects.get"),
)


class FeaturePermissions(NamedTuple):
    """Permissions a resource needs only when one of its inputs turns a feature on."""

    type: str
    feature: str
    applies: Callable[[Mapping[str, Any]], bool]
    permissions: TypePermissions
    source: str


def _fleet_project(inputs: Mapping[str, Any]) -> bool:
    fleet = inputs.get("fleet")
    return isinstance(fleet, Mapping) and isinstance(fleet.get("project"), str)


# A cluster created with a `fleet` block is registered as a fleet membership, and unregistered when it
# is deleted: the membership's own methods (gkehub.memberships create, get, update, delete). That GKE
# checks exactly these on the caller, rather than on its service agent, is UNVERIFIED: Google's sample
# deploys as the project's owner (docs/fleet.md, "APIs and roles").
FEATURE_PERMISSIONS: tuple[FeaturePermissions, ...] = (
    FeaturePermissions(
        type="gcp:container/cluster:Cluster",
        feature="fleet membership (fleet.project)",
        applies=_fleet_project,
        permissions=_crud("gkehub.memberships"),
        source="GKE Hub API REST reference, projects.locations.memberships (" + SOURCE + ")",
    ),
)


def feature_permissions_of(type_: str, inputs: Mapping[str, Any]) -> list[TypePermissions]:
    """The permissions the features this resource's inputs turn on need."""
    return [row.permissions for row in FEATURE_PERMISSIONS if row.type == type_ and row.applies(inputs)]


def permissions_of(type_: str) -> TypePermissions | None:
    """The permissions of a resource type; None for one that needs none (providers, components) or
    that the table lacks (apis_of reports those)."""
    if type_.startswith("kubernetes:"):
        return KUBERNETES_PERMISSIONS
    return TYPE_PERMISSIONS.get(type_)
