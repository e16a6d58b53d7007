"""A team's training data: its buckets and Managed Lustre instances as PersistentVolumes and claims in
its namespace, and the account its jobs read and write the buckets as (Workload Identity)."""

import hashlib
from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pulumi_gcp import serviceaccount, storage
from pydantic import Field

from ..core.arg_types import ClusterName, ProjectId
from ..core.common import KeyNames, Problems
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.egress import egress_policy_spec, public_https_egress_rule
from ..core.k8s import app_labels
from ..core.validation import ArgsModel
from .model import MAX_VOLUMES, BucketAccess, BucketProfile, NamespaceName, TeamName, TeamVolumeConfig
from .team_namespaces import TEAM_LABEL
from .training_data_rules import MOUNT_OPTIONS, check_volumes

GCS_FUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
# The Kubernetes service account a team's jobs name (`serviceAccountName`) to reach its buckets.
DATA_SERVICE_ACCOUNT = "training-data"
DATA_EGRESS_POLICY = "training-data-egress"
# GKE's Workload Identity annotation: the Google service account a Kubernetes account acts as.
GCP_SERVICE_ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"
# A bucket has no size; a claim binds to a volume of at least its request, so both say the same
# nominal size (gcsfuse's samples: 64Gi).
BUCKET_CAPACITY = "64Gi"
BUCKET_ROLES = {
    BucketAccess.READ.value: "roles/storage.objectViewer",
    BucketAccess.READ_WRITE.value: "roles/storage.objectUser",
}


class BucketVolume(TypedDict):
    """An existing Cloud Storage bucket."""

    bucket: str
    """The bucket's name (not gs://...)."""
    access: NotRequired[BucketAccess]
    """`read` (roles/storage.objectViewer on the bucket) or `readWrite` (roles/storage.objectUser).
    Defaults to read."""
    profile: NotRequired[BucketProfile]
    """The mount options: `training` (metadata cached, no file cache) or `checkpoints` (file cache,
    parallel downloads, streaming writes). Defaults to training."""


class LustreVolume(TypedDict):
    """An existing Managed Lustre instance, in the cluster's VPC."""

    instance: str
    """The instance's name."""
    zone: str
    """The instance's zone."""
    project: NotRequired[str]
    """The instance's project. Defaults to `project`."""
    ip: str
    """The instance's mount point IPv4 address."""
    filesystem: str
    """The instance's file system name (up to eight letters and digits)."""
    capacity_gib: int
    """The instance's capacity in GiB: the volume's size."""


class DataVolume(TypedDict):
    """One volume: exactly one of `gcs` and `lustre`."""

    name: str
    """The claim's name in the namespace (at most 40 characters); its PersistentVolume is
    `<namespace>-<name>`."""
    gcs: NotRequired[BucketVolume]
    """A bucket, mounted through GKE's Cloud Storage FUSE CSI driver."""
    lustre: NotRequired[LustreVolume]
    """A Managed Lustre instance, mounted through GKE's Managed Lustre CSI driver."""


class TrainingDataArgs(TypedDict):
    project: str
    """The project of the cluster (its Workload Identity pool) and of the service account."""
    cluster_name: str
    """The cluster's name: the service account's id is unique per cluster and team."""
    team: str
    """The team's name."""
    namespaces: list[str]
    """The team's namespaces (they must exist), each getting every claim and the service account: its
    own and, on a GPUDirect pool, its GPUDirect one (`gpudirect-<team>`), where its GPUDirect jobs run."""
    volumes: list[DataVolume]
    """The team's volumes (1 to 10)."""


class _TrainingDataSpec(ArgsModel):
    project: ProjectId
    cluster_name: ClusterName
    team: TeamName
    namespaces: Annotated[list[NamespaceName], Field(min_length=1, max_length=2)]
    volumes: Annotated[list[TeamVolumeConfig], Field(min_length=1, max_length=MAX_VOLUMES)]


def _data_rules(spec: _TrainingDataSpec) -> list[str]:
    problems = Problems()
    if len(set(spec.namespaces)) != len(spec.namespaces):
        problems.add("namespaces", "lists a namespace twice")
    # The cluster's version is GkeCluster's to check (`lustre_csi_driver`): none here.
    check_volumes(
        spec.volumes, KeyNames(camel=False), problems, key="volumes", minimum_version=None, version_key=""
    )
    return problems.items


def data_service_account_id(cluster_name: str, team: str) -> str:
    """The team's Google service account id (6-30 characters), unique per cluster and team."""
    digest = hashlib.sha256(f"{cluster_name}/{team}".encode()).hexdigest()[:6]
    return f"td-{team[:18].rstrip('-')}-{digest}"


class TrainingData(GkeGpuComponent[_TrainingDataSpec]):
    """A team's training data, as its jobs mount it: per volume and namespace a PersistentVolume bound to
    one claim there (`claimRef`, no StorageClass: no other claim takes it, nothing is provisioned),
    over an existing bucket (GKE's Cloud Storage FUSE CSI driver, gcsfuse's GPU mount options) or an
    existing Managed Lustre instance (GKE's Managed Lustre CSI driver). Both volumes are Retain: deleting
    them never touches the data.

    With a bucket, a Google service account that holds `roles/storage.objectViewer` (read) or
    `roles/storage.objectUser` (readWrite) on each of the team's buckets and nothing else, and the
    Kubernetes service account `training-data` in the namespace as the one account that may act as it
    (Workload Identity). A job names `serviceAccountName: training-data`, the annotation
    `gke-gcsfuse/volumes: "true"` and a volume of the claim (docs/teams.md, "Training data").

    The cluster needs the driver of each kind: GkeCluster's `gcs_fuse_csi_driver` (Standard; Autopilot
    always has it) and `lustre_csi_driver`. Not managed here: the buckets and instances themselves, and the
    Lustre instance's network (the cluster's VPC, Private Service Access)."""

    claim_names: pulumi.Output[list[str]]
    """The claims, in each of the team's namespaces."""
    service_account_name: pulumi.Output[str | None]
    """The Kubernetes service account jobs use for the buckets (None without a bucket)."""
    service_account_email: pulumi.Output[str | None]
    """The Google service account it acts as (None without a bucket)."""

    _args_model = _TrainingDataSpec
    _args_rules = staticmethod(_data_rules)
    _args_by_name = True

    def __init__(
        self,
        name: str,
        /,
        args: TrainingDataArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        labels = {**app_labels(spec.team, component="training-data"), TEAM_LABEL: spec.team}
        buckets = {v.gcs.bucket: v.gcs.access for v in spec.volumes if v.gcs is not None}
        email: pulumi.Output[str] | None = None
        if buckets:
            email = self._reader(name, spec, buckets, labels)
        for i, namespace in enumerate(spec.namespaces):
            for volume in spec.volumes:
                self._volume(name, spec, namespace, volume, labels)
            if buckets:
                self._bucket_egress(
                    f"{name}-egress" if i == 0 else f"{name}-egress-{namespace}", namespace, labels
                )
        self.claim_names = pulumi.Output.from_input([v.name for v in spec.volumes])
        self.service_account_name = pulumi.Output.from_input(DATA_SERVICE_ACCOUNT if buckets else None)
        self.service_account_email = email if email is not None else pulumi.Output.from_input(None)
        self.register_outputs(
            {
                "claimNames": self.claim_names,
                "serviceAccountName": self.service_account_name,
                "serviceAccountEmail": self.service_account_email,
            }
        )

    def _bucket_egress(self, resource_name: str, namespace: str, labels: dict[str, str]) -> None:
        """The team namespaces deny egress by default (team_namespaces.py): a job's Cloud Storage FUSE
        sidecar, in its Pod, needs HTTPS to Cloud Storage's public API addresses (the subnets' Private
        Google Access routes them; no private.googleapis.com zone is declared, so no smaller range
        reaches them). Every Pod of the namespace: any job may mount a claim. The metadata server, for
        Workload Identity's token, the team policy allows already. Lustre needs nothing here: the
        node's kernel client mounts it, outside the Pod's network."""
        k8s.networking.v1.NetworkPolicy(
            resource_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=DATA_EGRESS_POLICY, namespace=namespace, labels=labels),
            spec=egress_policy_spec([public_https_egress_rule()]),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _reader(
        self, name: str, spec: _TrainingDataSpec, buckets: dict[str, str], labels: dict[str, str]
    ) -> pulumi.Output[str]:
        """The Google service account, its role on each bucket (the widest the team asks for it), and the
        Kubernetes account that acts as it."""
        child = pulumi.ResourceOptions(parent=self)
        account = serviceaccount.Account(
            f"{name}-data-reader",
            account_id=data_service_account_id(spec.cluster_name, spec.team),
            project=spec.project,
            display_name=f"{spec.team}: its training data"[:100],
            description=f"{DATA_SERVICE_ACCOUNT} in {', '.join(spec.namespaces)} acts as it (gke-gpu)"[:256],
            opts=child,
        )
        member = account.email.apply(lambda email: f"serviceAccount:{email}")
        for bucket, access in sorted(buckets.items()):
            storage.BucketIAMMember(
                f"{name}-{bucket}-{access.lower()}",
                bucket=bucket,
                role=BUCKET_ROLES[access],
                member=member,
                opts=child,
            )
        for i, namespace in enumerate(spec.namespaces):
            # The first namespace's resources keep plain names; the GPUDirect one's carry it.
            suffix = "" if i == 0 else f"-{namespace}"
            identity = serviceaccount.IAMMember(
                f"{name}-workload-identity{suffix}",
                service_account_id=account.name,
                role="roles/iam.workloadIdentityUser",
                member=f"serviceAccount:{spec.project}.svc.id.goog[{namespace}/{DATA_SERVICE_ACCOUNT}]",
                opts=child,
            )
            k8s.core.v1.ServiceAccount(
                f"{name}-service-account{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=DATA_SERVICE_ACCOUNT,
                    namespace=namespace,
                    labels=labels,
                    annotations={GCP_SERVICE_ACCOUNT_ANNOTATION: account.email},
                ),
                # No API token in its Pods unless a job asks for one (the data needs none).
                automount_service_account_token=False,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[identity]),
            )
        return account.email

    def _volume(
        self,
        name: str,
        spec: _TrainingDataSpec,
        namespace: str,
        volume: TeamVolumeConfig,
        labels: dict[str, str],
    ) -> None:
        """A PersistentVolume bound to one claim of `namespace` (a volume binds one claim only: each
        namespace gets its own pair over the same bucket or instance)."""
        volume_name = f"{namespace}-{volume.name}"
        prefix = name if namespace == spec.namespaces[0] else f"{name}-{namespace}"
        if volume.gcs is not None:
            capacity = BUCKET_CAPACITY
            source: dict[str, Any] = {
                "mount_options": list(MOUNT_OPTIONS[volume.gcs.profile]),
                "csi": k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=GCS_FUSE_DRIVER,
                    volume_handle=volume.gcs.bucket,
                    volume_attributes={
                        # IAM on the bucket is the access check; the driver's own needs more rights.
                        "skipCSIBucketAccessCheck": "true",
                        "gcsfuseMetadataPrefetchOnMount": "true",
                    },
                ),
            }
        else:
            lustre = volume.lustre
            assert lustre is not None, "the rules keep exactly one source"
            capacity = f"{lustre.capacity_gib}Gi"
            source = {
                "volume_mode": "Filesystem",
                "csi": k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=LUSTRE_DRIVER,
                    volume_handle=f"{lustre.project or spec.project}/{lustre.zone}/{lustre.instance}",
                    volume_attributes={"ip": lustre.ip, "filesystem": lustre.filesystem},
                ),
            }
        persistent_volume = k8s.core.v1.PersistentVolume(
            f"{prefix}-{volume.name}-volume",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name, labels=labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                access_modes=["ReadWriteMany"],
                capacity={"storage": capacity},
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=namespace, name=volume.name),
                **source,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        k8s.core.v1.PersistentVolumeClaim(
            f"{prefix}-{volume.name}-claim",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume.name, namespace=namespace, labels=labels),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=volume_name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": capacity}),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[persistent_volume]),
        )
