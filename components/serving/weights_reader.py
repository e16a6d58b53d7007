"""The Google service account a service's gs:// weights are read as: it may read the model's bucket,
nothing else, and only one Kubernetes account may act as it (Workload Identity)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import pulumi
from pulumi_gcp import serviceaccount, storage

from .rules import gcs_location

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec


def service_account_id(cluster_name: str, name: str) -> str:
    """The service's Google service account id (6-30 chars), unique per cluster and service."""
    digest = hashlib.sha256(f"{cluster_name}/{name}".encode()).hexdigest()[:6]
    return f"sv-{name[:20].rstrip('-')}-{digest}"


def declare_weights_reader(
    parent: pulumi.Resource, name: str, spec: InferenceServiceSpec, namespace: str, ksa: str
) -> tuple[serviceaccount.Account, list[pulumi.Resource]]:
    """The account, its `roles/storage.objectViewer` on the model's bucket, and the Kubernetes account
    `ksa` of `namespace` (the server's, or the Hyperdisk ML transfer's) as the one that may act as it;
    children of `parent`. Returns the account and its two grants."""
    bucket, _ = gcs_location(spec.model)
    child = pulumi.ResourceOptions(parent=parent)
    account = serviceaccount.Account(
        f"{name}-weights-reader",
        account_id=service_account_id(spec.cluster_name, spec.name),
        project=spec.project,
        display_name=f"{spec.name}: reads its model's weights"[:100],
        opts=child,
    )
    viewer = storage.BucketIAMMember(
        f"{name}-weights-viewer",
        bucket=bucket,
        role="roles/storage.objectViewer",
        member=account.email.apply(lambda email: f"serviceAccount:{email}"),
        opts=child,
    )
    identity = serviceaccount.IAMMember(
        f"{name}-workload-identity",
        service_account_id=account.name,
        role="roles/iam.workloadIdentityUser",
        member=f"serviceAccount:{spec.project}.svc.id.goog[{namespace}/{ksa}]",
        opts=child,
    )
    return account, [viewer, identity]
