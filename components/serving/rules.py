"""The rules of a model server's settings, for the stack file's `serving` entries and InferenceService's
args alike (only the key names differ: KeyNames)."""

from __future__ import annotations

from ..core.common import KeyNames, Problems, cut
from .model import GCS_MODEL, HF_MODEL, ModelServerSettings


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
    """The model's form and what it needs: a Hugging Face model a token Secret, a bucket's model no
    token; a bucket path without `..`."""
    source = weights_source(settings.model)
    if not source:
        problems.add(
            names.at("model"),
            f"{cut(settings.model)} is neither gs://<bucket>/<path> nor a Hugging Face id <owner>/<name>",
        )
        return
    if source == "huggingface" and settings.hf_token_secret is None:
        problems.add(
            names.at("hf_token_secret"),
            f"required for a Hugging Face model ({cut(settings.model)}): the name of a Secret in the "
            "service's namespace whose key `token` holds a Hugging Face token (create it with kubectl "
            "create secret generic)",
        )
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
