"""The rules of a model server's settings, for the stack file's `serving` entries and InferenceService's
args alike (only the key names differ: KeyNames)."""

from __future__ import annotations

import math

from ..core.common import COMPUTE_CLASS_POOLS_MIN_VERSION, KeyNames, Problems, cut, listing
from .bucket_name import bucket_name_problem
from .model import GCS_MODEL, HF_MODEL, ModelServerSettings

# The machine series that attach Hyperdisk ML, by the PD CSI driver's own machine-to-disk table
# (kubernetes-sigs/gcp-compute-persistent-disk-csi-driver@b560165c
# deploy/kubernetes/overlays/node-labeler/configmap.yaml). Of the GPU series: A2, A3, A4, A4X, G2 and
# G4 do; N1 (T4, V100, P100, P4) does not.
HYPERDISK_ML_SERIES = frozenset(
    {"a2", "a3", "a4", "a4x", "c3", "c3d", "c4a", "ct5lp", "ct5p", "ct6e", "g2", "g4", "n4a", "tpu7x"}
)
# Compute Engine provisions a Hyperdisk ML volume at least 0.12 MiB/s per GiB (the PD CSI driver's
# minThroughputForML, pkg/common/utils.go, which cites Compute Engine's Hyperdisk limits).
MIN_MIBPS_PER_GIB = 0.12
# First GKE versions: the Volume Populator for Hyperdisk ML (its how-to), and node pools auto-created
# for a ComputeClass on a Standard cluster without node auto-provisioning (core/common.py).
POPULATOR_MIN_VERSION = "1.33.2-gke.4780000"
STANDARD_MIN_VERSION = COMPUTE_CLASS_POOLS_MIN_VERSION


def min_throughput(size_gib: int) -> int:
    """The least throughput Compute Engine provisions for a Hyperdisk ML volume of `size_gib`."""
    return math.ceil(size_gib * MIN_MIBPS_PER_GIB)


def weights_source(model: str) -> str:
    """`gcs` for gs://<bucket>/<path>, `huggingface` for <owner>/<name>, `` for neither."""
    if GCS_MODEL.fullmatch(model):
        return "gcs"
    if HF_MODEL.fullmatch(model):
        return "huggingface"
    return ""


def gcs_location(model: str) -> tuple[str, str]:
    """(bucket, path inside it) of a gs:// model."""
    match = GCS_MODEL.fullmatch(model)
    assert match is not None, "a gs:// model (weights_source)"
    return match.group("bucket"), (match.group("path") or "").strip("/")


def check_model_server(settings: ModelServerSettings, names: KeyNames, problems: Problems) -> None:
    """The model's form and what it needs: a bucket's model no token (a gated Hugging Face model's token:
    fit.check_model); a bucket path without `..`."""
    source = weights_source(settings.model)
    if settings.model.startswith("gs://"):
        bucket = settings.model.removeprefix("gs://").split("/", 1)[0]
        if (broken := bucket_name_problem(bucket)) is not None:
            problems.add(names.at("model"), f"{cut(settings.model)}: bucket {cut(bucket)} {broken}")
            return
    if not source:
        problems.add(
            names.at("model"),
            f"{cut(settings.model)} is neither gs://<bucket>/<path> nor a Hugging Face id <owner>/<name>",
        )
        return
    if source == "gcs":
        if settings.hf_token_secret is not None:
            problems.add(
                names.at("hf_token_secret"),
                "only allowed with a Hugging Face model: a gs:// model is read with the service's "
                "Workload Identity",
            )
        _, path = gcs_location(settings.model)
        if not path or any(part in (".", "..") for part in path.split("/")):
            problems.add(
                names.at("model"),
                f"{cut(settings.model)} needs the path of the model's files inside the bucket "
                "(gs://<bucket>/<path>, without `.` or `..` segments)",
            )
    _check_weights(settings, source, names, problems)


def _check_weights(settings: ModelServerSettings, source: str, names: KeyNames, problems: Problems) -> None:
    """`weights`: a Hyperdisk ML volume only for a bucket's model and with a size; its size and
    throughput only with it."""
    weights = settings.weights
    size_key, throughput_key = names.at("weights.size_gib"), names.at("weights.throughput_mi_bps")
    if weights.via != "hyperdiskMl":
        for key, value in ((size_key, weights.size_gib), (throughput_key, weights.throughput_mi_bps)):
            if value is not None:
                problems.add(key, f"{value} is only allowed with weights.via hyperdiskMl")
        return
    if source == "huggingface":
        problems.add(
            names.at("weights.via"),
            f"hyperdiskMl is only allowed with a gs:// model, not a Hugging Face id ({cut(settings.model)}): "
            "the GKE Volume Populator fills the volume from Cloud Storage",
        )
        return  # its size and throughput would not be used: no follow-on problem about them
    if weights.size_gib is None:
        problems.add(
            size_key,
            "required with weights.via hyperdiskMl: the volume's size in GiB, larger than the model's files "
            "(a transfer into a full volume fails, and the populator retries it for ever)",
        )
    elif (given := weights.throughput_mi_bps) is not None and given < min_throughput(weights.size_gib):
        problems.add(
            throughput_key,
            f"{given} is below {min_throughput(weights.size_gib)}, the least Compute "
            f"Engine provisions for {weights.size_gib} GiB (0.12 MiB/s per GiB)",
        )


def check_hyperdisk_ml_machine(series: tuple[str, ...], machine: str, key: str, problems: Problems) -> None:
    """Every node that runs a replica must attach the volume (`series`: the machine series the pool's
    nodes may be of)."""
    unsupported = sorted(s for s in series if s not in HYPERDISK_ML_SERIES)
    if unsupported:
        problems.add(
            key,
            f"hyperdiskMl is not allowed on pool {machine}: {listing(s.upper() for s in unsupported)} "
            "machines cannot attach Hyperdisk ML volumes (GPU series that can: A2, A3, A4, A4X, G2, G4); "
            "use cloudStorageFuse (the default)",
        )


def check_replica_nodes(
    gpus: int, gpus_per_node: int, per_node: str, names: KeyNames, problems: Problems
) -> None:
    """A replica with more GPUs than a node has spans whole nodes (tensor parallel within each node,
    pipeline parallel across them), so its GPUs are a whole multiple of a node's. `per_node` says
    whose GPUs per node they are, as the caller names them."""
    if gpus > gpus_per_node and gpus % gpus_per_node:
        below, above = gpus // gpus_per_node * gpus_per_node, (gpus // gpus_per_node + 1) * gpus_per_node
        problems.add(
            names.at("gpus_per_replica"),
            f"{gpus} is not a whole multiple of {per_node}: a replica larger than a node takes whole "
            f"nodes (vLLM's tensor parallel within each, pipeline parallel across them); use {below} or "
            f"{above}",
        )


# GKE's per-container duty cycle (the autoscaler's `scale_on: gpu`) is documented for GPUs its device
# plugin allocates; no GKE page says it reports one for a GPU a DRA claim gives a container.
DRA_DUTY_CYCLE_UNKNOWN = (
    "no GKE page says it reports a container's GPU duty cycle for GPUs a DRA claim gives it, and without "
    "one the autoscaler never scales (docs/serving.md, 'DRA GPU pools')"
)
