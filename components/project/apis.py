"""The Google APIs a stack needs: per resource type (every type the program can declare has a row,
tests/test_preflight.py fails on a rendered type without one) and per feature (an input the type
only sometimes sets). Read 2026-12-07; docs/preflight.md has the sources in full."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

# The API names, with what each is called in the console and why a stack needs it.
API_TITLES: dict[str, str] = {
    "compute.googleapis.com": "Compute Engine API",
    "container.googleapis.com": "Kubernetes Engine API",
    "iam.googleapis.com": "Identity and Access Management (IAM) API",
    "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API",
    "monitoring.googleapis.com": "Cloud Monitoring API",
    "artifactregistry.googleapis.com": "Artifact Registry API",
    "storage.googleapis.com": "Cloud Storage API",
    "containerfilesystem.googleapis.com": "Container File System API",
    "binaryauthorization.googleapis.com": "Binary Authorization API",
    "cloudkms.googleapis.com": "Cloud Key Management Service (KMS) API",
    "serviceusage.googleapis.com": "Service Usage API",
    "gkehub.googleapis.com": "GKE Hub API",
    "connectgateway.googleapis.com": "Connect Gateway API",
}

# Where each resource type's API is named: the provider resource's own reference page (pulumi-gcp
# 10.2 bridges terraform-provider-google, whose pages link the REST resource it calls), and the API
# the REST resource belongs to (https://<api>/ discovery, as iann0036/iam-dataset@2073fa52 gcp/map.json
# lists each method under its API).
_TYPE_SOURCE = "the REST methods the provider calls (iann0036/iam-dataset@2073fa52 gcp/map.json, by API)"

# Every resource type the program declares, with the APIs its create/read/update/delete call.
# Kubernetes objects go to the cluster's API server, reached through the GKE API's DNS endpoint.
RESOURCE_APIS: dict[str, tuple[str, ...]] = {
    "gcp:compute/network:Network": ("compute.googleapis.com",),
    "gcp:compute/subnetwork:Subnetwork": ("compute.googleapis.com",),
    "gcp:compute/router:Router": ("compute.googleapis.com",),
    "gcp:compute/routerNat:RouterNat": ("compute.googleapis.com",),
    "gcp:compute/firewall:Firewall": ("compute.googleapis.com",),
    "gcp:compute/networkPeering:NetworkPeering": ("compute.googleapis.com",),
    "gcp:compute/resourcePolicy:ResourcePolicy": ("compute.googleapis.com",),
    # A cluster's nodes are Compute Engine VMs in the project: GKE's "Before you begin" enables both.
    "gcp:container/cluster:Cluster": ("container.googleapis.com", "compute.googleapis.com"),
    "gcp:container/nodePool:NodePool": ("container.googleapis.com", "compute.googleapis.com"),
    "gcp:serviceaccount/account:Account": ("iam.googleapis.com",),
    "gcp:serviceaccount/iAMMember:IAMMember": ("iam.googleapis.com",),
    "gcp:projects/iAMMember:IAMMember": ("cloudresourcemanager.googleapis.com",),
    "gcp:projects/service:Service": ("serviceusage.googleapis.com",),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("storage.googleapis.com",),
    "gcp:artifactregistry/repository:Repository": ("artifactregistry.googleapis.com",),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": ("artifactregistry.googleapis.com",),
    "gcp:monitoring/dashboard:Dashboard": ("monitoring.googleapis.com",),
    "gcp:monitoring/alertPolicy:AlertPolicy": ("monitoring.googleapis.com",),
}
# Types that call no Google API of the project: providers, and Kubernetes objects (the cluster's
# API server; on a GKE cluster the Kubernetes Engine API is already needed by the cluster itself).
NO_API_PREFIXES = ("pulumi:providers:", "kubernetes:")


def _get(data: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


class FeatureApi(NamedTuple):
    """An API a resource needs only when one of its inputs turns a feature on."""

    type: str
    feature: str
    applies: Callable[[Mapping[str, Any]], bool]
    api: str
    source: str


_IMAGE_STREAMING = (
    "GKE 'Use Image streaming to pull container images' (docs.cloud.google.com/kubernetes-engine/docs/"
    "how-to/image-streaming), Requirements, for Autopilot and Standard clusters: 'You must enable the "
    "Container File System API'; 'Autopilot clusters automatically use Image streaming'"
)

_FLEET = (
    "GoogleCloudPlatform/gke-fleet-management multikueue-clusterprofile (1-infrastructure/main.tf:24-36, "
    "README.md:28-37, 214-222): the fleet host project enables gkehub and connectgateway; a cluster with "
    "a `fleet` block is registered as a membership there, and the manager's Kueue reaches its workers "
    "through Connect Gateway (docs/fleet.md)"
)


def _in_fleet(inputs: Mapping[str, Any]) -> bool:
    return isinstance(_get(inputs, "fleet", "project"), str)


FEATURE_APIS: tuple[FeatureApi, ...] = (
    FeatureApi(
        type="gcp:container/cluster:Cluster",
        feature="fleet membership (fleet.project)",
        applies=_in_fleet,
        api="gkehub.googleapis.com",
        source=_FLEET,
    ),
    FeatureApi(
        type="gcp:container/cluster:Cluster",
        feature="Connect Gateway to fleet members (fleet.project)",
        applies=_in_fleet,
        api="connectgateway.googleapis.com",
        source=_FLEET,
    ),
    FeatureApi(
        type="gcp:container/cluster:Cluster",
        feature="image streaming (on in every Autopilot cluster)",
        applies=lambda inputs: inputs.get("enableAutopilot") is True,
        api="containerfilesystem.googleapis.com",
        source=_IMAGE_STREAMING,
    ),
    FeatureApi(
        type="gcp:container/cluster:Cluster",
        feature="Managed Service for Prometheus (monitoringConfig.managedPrometheus.enabled)",
        applies=lambda inputs: _get(inputs, "monitoringConfig", "managedPrometheus", "enabled") is True,
        api="monitoring.googleapis.com",
        source=(
            "Managed Service for Prometheus, 'Get started with managed collection': the Cloud "
            "Monitoring API must be enabled in the project (it stores the metrics)"
        ),
    ),
    FeatureApi(
        type="gcp:container/nodePool:NodePool",
        feature="image streaming (nodeConfig.gcfsConfig.enabled)",
        applies=lambda inputs: _get(inputs, "nodeConfig", "gcfsConfig", "enabled") is True,
        api="containerfilesystem.googleapis.com",
        source=_IMAGE_STREAMING,
    ),
    FeatureApi(
        type="gcp:container/cluster:Cluster",
        feature="Binary Authorization (binaryAuthorization.evaluationMode)",
        applies=lambda inputs: (
            _get(inputs, "binaryAuthorization", "evaluationMode") not in (None, "DISABLED")
        ),
        api="binaryauthorization.googleapis.com",
        source=(
            "GKE 'Enable Binary Authorization' / Binary Authorization 'Set up for GKE': enable the Binary "
            "Authorization API in the cluster's project before turning evaluation on"
        ),
    ),
    FeatureApi(
        type="gcp:container/cluster:Cluster",
        feature="application-layer Secrets encryption (databaseEncryption.state ENCRYPTED)",
        applies=lambda inputs: _get(inputs, "databaseEncryption", "state") == "ENCRYPTED",
        api="cloudkms.googleapis.com",
        source=(
            "GKE 'Encrypt Secrets at the application layer': 'Enable the Cloud KMS API' in the key's "
            "project (the key is named by the stack; the program grants nothing on it)"
        ),
    ),
)


class ApiNeed(NamedTuple):
    api: str
    why: tuple[str, ...]


def apis_of(resources: list[tuple[str, Mapping[str, Any]]]) -> tuple[list[ApiNeed], list[str]]:
    """The APIs these (type, camelCase inputs) need, each with what needs it, and the resource types
    no row covers (a bug of the tables: the tests fail on one)."""
    why: dict[str, list[str]] = {}
    unknown: list[str] = []
    for type_, inputs in resources:
        if type_.startswith(NO_API_PREFIXES):
            continue
        apis = RESOURCE_APIS.get(type_)
        if apis is None:
            if not type_.startswith("gke-gpu:") and type_ not in unknown:
                unknown.append(type_)
            continue
        short = type_.rsplit(":", 1)[-1]
        for api in apis:
            _add(why, api, short)
        for row in FEATURE_APIS:
            if row.type == type_ and row.applies(inputs):
                _add(why, row.api, row.feature)
    needs = [ApiNeed(api, tuple(why[api])) for api in sorted(why)]
    return needs, unknown


def _add(why: dict[str, list[str]], api: str, reason: str) -> None:
    reasons = why.setdefault(api, [])
    if reason not in reasons:
        reasons.append(reason)
