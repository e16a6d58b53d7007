"""The preflight of a stack, computed from the resources a render declares (type, camelCase inputs,
provider): per GCP project, the APIs to enable, the deploying identity's least predefined roles for
`pulumi up` and for a read-only `pulumi preview` with the permissions behind each, and the quota lines
(per region and metric, with the clusters they are for). `tools/render.py` prints it, `--json`
carries it, and `tools/preflight.py` checks it against a real project."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .apis import API_TITLES, ApiNeed, apis_of
from .permissions import feature_permissions_of, permissions_of
from .quotas import QuotaLine, compute_class_quota, merge, network_quota, node_pool_quota, region_of
from .roles import PREVIEW_ROLES, UP_ROLES, RoleGrant, least_roles

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
NETWORK = "gcp:compute/network:Network"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"


class DeclaredResource(NamedTuple):
    type: str
    name: str
    inputs: Mapping[str, Any]
    provider: str | None = None
    urn: str = ""


@dataclass
class BucketGrant:
    bucket: str
    up: list[RoleGrant]
    preview: list[RoleGrant]


@dataclass
class ProjectPreflight:
    project: str
    apis: list[ApiNeed] = field(default_factory=list)
    up: list[RoleGrant] = field(default_factory=list)
    preview: list[RoleGrant] = field(default_factory=list)
    buckets: list[BucketGrant] = field(default_factory=list)
    quotas: list[QuotaLine] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    ungranted: list[str] = field(default_factory=list)
    """Permissions no candidate role grants (a bug of the tables: the tests fail on one)."""


@dataclass
class Preflight:
    projects: list[ProjectPreflight]
    unknown_types: list[str]
    """Resource types the tables have no row for (the tests fail on one)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "projects": [_project_json(p) for p in self.projects],
            "unknownTypes": list(self.unknown_types),
        }


def _grants_json(grants: list[RoleGrant]) -> list[dict[str, Any]]:
    return [{"role": g.role, "title": g.title, "permissions": list(g.permissions)} for g in grants]


def _project_json(p: ProjectPreflight) -> dict[str, Any]:
    return {
        "project": p.project,
        "clusters": list(p.clusters),
        "apis": [{"api": a.api, "title": API_TITLES.get(a.api, a.api), "for": list(a.why)} for a in p.apis],
        "roles": {"up": _grants_json(p.up), "preview": _grants_json(p.preview)},
        "buckets": [
            {"bucket": b.bucket, "roles": {"up": _grants_json(b.up), "preview": _grants_json(b.preview)}}
            for b in p.buckets
        ],
        "quotas": [
            {
                "region": q.region,
                "metric": q.metric,
                "max": q.amount,
                "kind": q.kind,
                "pools": list(q.pools),
                **({} if q.verified else {"unverified": True}),
            }
            for q in p.quotas
        ],
        "ungranted": list(p.ungranted),
    }


def _cluster_project(identifier: Any) -> str | None:
    """The project of a Kubernetes provider's cluster (`gke/<project>/<location>/<name>`)."""
    if isinstance(identifier, str) and identifier.startswith("gke/") and identifier.count("/") == 3:
        return identifier.split("/")[1]
    return None


def compute_preflight(resources: Iterable[DeclaredResource], *, default_project: str) -> Preflight:
    """The preflight of these declared resources (components and providers are skipped); a resource
    without a `project` input (a Kubernetes object) belongs to its provider's cluster's project."""
    resources = list(resources)
    provider_project = {
        r.urn: p
        for r in resources
        if r.type == "pulumi:providers:kubernetes"
        and (p := _cluster_project(r.inputs.get("clusterIdentifier")))
    }
    cluster_region = {
        (r.inputs.get("project"), r.inputs.get("name")): region_of(str(r.inputs.get("location")))
        for r in resources
        if r.type == CLUSTER
    }
    by_project: dict[str, list[DeclaredResource]] = {}
    for r in resources:
        if r.type.startswith("gke-gpu:") or r.type.startswith("pulumi:"):
            continue
        project = r.inputs.get("project")
        if not isinstance(project, str) and r.type.startswith("kubernetes:"):
            # Objects on a cluster the program creates: GKE checks IAM, in that cluster's project (a
            # provider the render does not name is the stack's cluster's). On a cluster one brings (no
            # cluster declared), the kubeconfig's own RBAC decides: no IAM to compute.
            provider = (r.provider or "").rsplit("::", 1)[0]
            project = provider_project.get(provider) or (default_project if cluster_region else None)
        elif not isinstance(project, str):
            project = default_project
        if project:
            by_project.setdefault(project, []).append(r)
    results = []
    unknown: list[str] = []
    for project in sorted(by_project):
        members = by_project[project]
        apis, missing = apis_of([(r.type, r.inputs) for r in members])
        unknown += [t for t in missing if t not in unknown]
        result = ProjectPreflight(project, apis=apis)
        up: set[str] = set()
        preview: set[str] = set()
        buckets: dict[str, tuple[set[str], set[str]]] = {}
        quotas: list[QuotaLine] = []
        networks: list[str] = []
        for r in members:
            perms = permissions_of(r.type)
            if perms is not None and perms.scope == "bucket":
                bucket = str(r.inputs.get("bucket"))
                held = buckets.setdefault(bucket, (set(), set()))
                held[0].update(perms.up)
                held[1].update(perms.preview)
            elif perms is not None:
                up.update(perms.up)
                preview.update(perms.preview)
            for extra in feature_permissions_of(r.type, r.inputs):
                up.update(extra.up)
                preview.update(extra.preview)
            if r.type == CLUSTER:
                result.clusters.append(str(r.inputs.get("name")))
            elif r.type == NODE_POOL:
                quotas += node_pool_quota(project, r.inputs, str(r.inputs.get("name")))
            elif r.type == NETWORK:
                networks.append(str(r.inputs.get("name")))
            elif r.type == COMPUTE_CLASS:
                region = next(iter(cluster_region.values()), "") if len(cluster_region) == 1 else ""
                name = str((r.inputs.get("metadata") or {}).get("name"))
                quotas += compute_class_quota(project, region, r.inputs, name)
        result.up, missing_up = least_roles(up, UP_ROLES)
        result.preview, missing_preview = least_roles(preview, PREVIEW_ROLES)
        result.ungranted = sorted({*missing_up, *missing_preview})
        for bucket, (bucket_up, bucket_preview) in sorted(buckets.items()):
            grants_up, left_up = least_roles(bucket_up, UP_ROLES)
            grants_preview, left_preview = least_roles(bucket_preview, PREVIEW_ROLES)
            result.buckets.append(BucketGrant(bucket, grants_up, grants_preview))
            result.ungranted = sorted({*result.ungranted, *left_up, *left_preview})
        result.quotas = merge([*quotas, *network_quota(project, networks)])
        results.append(result)
    return Preflight(results, unknown)
