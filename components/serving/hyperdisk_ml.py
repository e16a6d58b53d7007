"""Hyperdisk ML for a gs:// model's weights: a read-only-many volume per zone, filled once from the
bucket by the GKE Volume Populator, that every replica mounts at the weights directory instead of the
Cloud Storage FUSE volume.

What GKE documents (docs/serving.md, "Weights: Cloud Storage FUSE or Hyperdisk ML", has the sources):
a PersistentVolumeClaim whose `dataSourceRef` names a `GCPDataSource` (datalayer.gke.io/v1: the
bucket URI and a Kubernetes service account that may read it, in the claim's namespace) makes the
populator run a transfer Job, on nodes of the ComputeClass `gcs-to-hdml-compute-class`
(HyperdiskMlTransferClass), that copies the bucket's folder into a new Hyperdisk ML volume; the claim
binds only when every zone's copy is done, and a Pod using it waits until then. Hyperdisk ML is zonal:
with `enable-multi-zone-provisioning` the PD CSI driver makes one disk per zone of the StorageClass's
allowedTopologies, and the populator fills each.

Hazards, each handled here:
- the populator fills a volume once, when its claim is created: a change of the model, the size, the
  throughput or the zones must make a new claim (and StorageClass, whose parameters are immutable).
  Their names carry a hash of all four (`volume_key`), so a change replaces them, the new volume is
  filled, and the Deployment rolls over to it;
- Pulumi's PersistentVolumeClaim await gives up after 5 minutes unbound (pulumi-kubernetes
  provider/pkg/await/awaiters.go, `untilCoreV1PersistentVolumeClaimReady`), shorter than a transfer:
  the claim skips it, and the Deployment's rollout (which reports an unbound claim) waits instead,
  for the transfer's budget on top of the server's own;
- deleting the GCPDataSource before its claim leaves the claim stuck (GKE's how-to): the claim
  depends on it, so Pulumi deletes the claim first and waits until it is gone (skipAwait does not
  skip a claim's deletion: provider/pkg/metadata/overrides.go, `allowsSkipAwaitWithDelete`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s

from ..core.common import Problems
from ..core.k8s import app_labels
from .model import WeightsConfig
from .rules import gcs_location, min_throughput, weights_source

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec

PROVISIONER = "pd.csi.storage.gke.io"
DATA_SOURCE_GROUP = "datalayer.gke.io"
DATA_SOURCE_API_VERSION = f"{DATA_SOURCE_GROUP}/v1"
# The transfer Job's ComputeClass: the name is fixed by GKE (Volume Populator Hyperdisk ML how-to).
TRANSFER_CLASS = "gcs-to-hdml-compute-class"
# The Kubernetes account the transfer reads the bucket as: its own, not the server's (GKE's how-to
# advises against reusing it for other workloads, which could then read the bucket).
TRANSFER_KSA = "weights-transfer"
# GKE's own Hyperdisk ML StorageClasses provision 2400 MiB/s (the populator how-to,
# kubernetes-engine-samples ai-ml/gke-model-armor hyperdisk-ml-sc.yaml).
DEFAULT_THROUGHPUT_MIBPS = 2400
# What `pulumi up` waits for the transfer, on top of the server's own rollout budget. UNVERIFIED: no
# transfer rate is published (GKE's how-to shows one transfer of about six minutes, size not given).
TRANSFER_TIMEOUT_S = 45 * 60


def throughput(weights: WeightsConfig) -> int:
    """The volume's provisioned throughput: as given, else 2400 MiB/s or the size's minimum."""
    assert weights.size_gib is not None, "the rules require a size with via hyperdiskMl"
    return weights.throughput_mi_bps or max(DEFAULT_THROUGHPUT_MIBPS, min_throughput(weights.size_gib))


def uses_hyperdisk_ml(weights: WeightsConfig) -> bool:
    return weights.via == "hyperdiskMl"


def volume_key(model: str, weights: WeightsConfig, zones: Sequence[str]) -> str:
    """8 hex digits of what the populator copies and where: the model, size, throughput and zones."""
    text = f"{model}|{weights.size_gib}|{throughput(weights)}|{','.join(sorted(zones))}"
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def claim_name(spec: InferenceServiceSpec) -> str:
    """The claim's name (the GCPDataSource's too): `weights-<volume_key>`."""
    return f"weights-{volume_key(spec.model, spec.weights, spec.zones or ())}"


def claim_volume(spec: InferenceServiceSpec, volume: str) -> k8s.core.v1.VolumeArgs:
    """The Pod's weights volume: the filled claim, read-only."""
    return k8s.core.v1.VolumeArgs(
        name=volume,
        persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
            claim_name=claim_name(spec), read_only=True
        ),
    )


def declare_volume(
    parent: pulumi.Resource,
    name: str,
    spec: InferenceServiceSpec,
    namespace: str,
    reader_email: pulumi.Input[str],
    depends_on: list[pulumi.Resource],
) -> pulumi.Resource:
    """The transfer's Kubernetes account (acting as the service's Google account, which may read the
    bucket), the StorageClass, the GCPDataSource and the claim, all children of `parent`; returns the
    claim. `depends_on`: the namespace and the bucket grants (a transfer before them is refused)."""
    bucket, path = gcs_location(spec.model)
    zones = sorted(spec.zones or ())
    key = volume_key(spec.model, spec.weights, zones)
    labels = app_labels(spec.name, component="model-weights")
    after = pulumi.ResourceOptions(parent=parent, depends_on=depends_on)
    ksa = k8s.core.v1.ServiceAccount(
        f"{name}-transfer-serviceaccount",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=TRANSFER_KSA,
            namespace=namespace,
            labels=labels,
            annotations={"iam.gke.io/gcp-service-account": reader_email},
        ),
        opts=after,
    )
    parameters = {"type": "hyperdisk-ml", "provisioned-throughput-on-create": f"{throughput(spec.weights)}Mi"}
    if len(zones) > 1:
        # One disk per zone (a Hyperdisk ML disk is zonal), each filled by the populator.
        parameters["enable-multi-zone-provisioning"] = "true"
    storage_class = k8s.storage.v1.StorageClass(
        f"{name}-weights-class",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"hdml-{spec.name}-{key}", labels=labels),
        provisioner=PROVISIONER,
        parameters=parameters,
        # Immediate: the disks are made in every listed zone (the driver's requisite topology) and the
        # transfer starts with `pulumi up`, not when a GPU node comes up.
        volume_binding_mode="Immediate",
        allowed_topologies=[
            k8s.core.v1.TopologySelectorTermArgs(
                match_label_expressions=[
                    k8s.core.v1.TopologySelectorLabelRequirementArgs(key="topology.gke.io/zone", values=zones)
                ]
            )
        ],
        reclaim_policy="Delete",
        allow_volume_expansion=False,
        # Larger read-ahead for large sequential reads (GKE's Hyperdisk ML sample StorageClass).
        mount_options=["read_ahead_kb=4096"],
        opts=pulumi.ResourceOptions(parent=parent),
    )
    source = k8s.apiextensions.CustomResource(
        f"{name}-weights-source",
        api_version=DATA_SOURCE_API_VERSION,
        kind="GCPDataSource",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"weights-{key}", namespace=namespace, labels=labels),
        # A folder's URI ends with '/' (GKE's how-to); its files land at the volume's root.
        spec={"cloudStorage": {"serviceAccountName": TRANSFER_KSA, "uri": f"gs://{bucket}/{path}/"}},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*depends_on, ksa]),
    )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-weights-claim",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=claim_name(spec),
            namespace=namespace,
            labels=labels,
            # Bound only when every zone's copy is done: the Deployment's rollout waits for it.
            annotations={"pulumi.com/skipAwait": "true"},
        ),
        spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadOnlyMany"],
            storage_class_name=storage_class.metadata.name,
            resources=k8s.core.v1.VolumeResourceRequirementsArgs(
                requests={"storage": f"{spec.weights.size_gib}Gi"}
            ),
            data_source_ref=k8s.core.v1.TypedObjectReferenceArgs(
                api_group=DATA_SOURCE_GROUP, kind="GCPDataSource", name=f"weights-{key}"
            ),
        ),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*depends_on, ksa, source, storage_class]),
    )


def check_volume_args(spec: InferenceServiceSpec, problems: Problems) -> None:
    """InferenceService's own rules for the volume: its zones, and no FUSE file cache beside it."""
    if not uses_hyperdisk_ml(spec.weights):
        if spec.zones is not None:
            problems.add("zones", "only allowed with weights.via hyperdiskMl (where its volumes are made)")
        return
    if weights_source(spec.model) != "gcs":  # refused by the shared rules: nothing follows from it
        return
    if not spec.zones:
        problems.add(
            "zones",
            "required with weights.via hyperdiskMl: the zones of the pool's nodes (a Hyperdisk ML volume "
            "is zonal; one is made in each)",
        )
    if spec.weights_cache_gib:
        problems.add(
            "weights_cache_gib",
            f"{spec.weights_cache_gib} is not allowed with weights.via hyperdiskMl (the file cache is "
            "Cloud Storage FUSE's)",
        )
