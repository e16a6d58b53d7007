"""The parts of a vLLM server's Pod that are plain data: its arguments, the bucket's mount options,
and who may reach its port."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi_kubernetes as k8s

from ..core import images
from ..core.k8s import app_labels, image_version, selector_labels
from .rules import weights_source

if TYPE_CHECKING:
    from .inference_service import InferenceServiceSpec

PORT = 8000
# vLLM's image has a user 2000 in group 0 (home /home/vllm): the one UID the stock image knows
# (docs/serving-research.md 1d); another UID has no passwd entry, and getpass.getuser() fails.
VLLM_USER, VLLM_GROUP = 2000, 0
HOME = "/home/vllm"
WEIGHTS_DIR = "/models"


def server_labels(name: str) -> dict[str, str]:
    """The labels of a service's server Pods (their selector: `selector_labels` of these)."""
    return app_labels(name, component="inference-server", version=image_version(images.VLLM))


def vllm_args(spec: InferenceServiceSpec) -> list[str]:
    """The `vllm serve` arguments (the image's entrypoint): the model, its name, the GPUs, the port."""
    source = weights_source(spec.model)
    model = f"{WEIGHTS_DIR}" if source == "gcs" else spec.model
    args = [
        model,
        f"--served-model-name={spec.name}",
        f"--tensor-parallel-size={spec.gpus_per_replica}",
        "--host=0.0.0.0",
        f"--port={PORT}",
    ]
    if spec.max_model_len is not None:
        args.append(f"--max-model-len={spec.max_model_len}")
    if source == "huggingface":
        args.append(f"--download-dir={HOME}/.cache/huggingface")
    return args


def mount_options(path: str) -> str:
    """Cloud Storage FUSE options for read-only weights: only the model's directory, owned by vLLM's
    user, with the metadata cached for the mount's life (weights do not change under a running
    server); from Google's vLLM reference (docs/serving-research.md 4c), without its file cache."""
    return ",".join(
        [
            f"only-dir={path}",
            "implicit-dirs",
            f"uid={VLLM_USER}",
            f"gid={VLLM_GROUP}",
            "metadata-cache:ttl-secs:-1",
            "metadata-cache:stat-cache-max-size-mb:-1",
            "metadata-cache:type-cache-max-size-mb:-1",
        ]
    )


def network_policy(
    spec: InferenceServiceSpec, labels: dict[str, str]
) -> k8s.networking.v1.NetworkPolicySpecArgs:
    """Ingress to the API port from the namespace itself, the client namespaces and GMP's scraper."""
    namespaces = [*spec.client_namespaces, "gmp-system"]
    peers = [k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs())] + [
        k8s.networking.v1.NetworkPolicyPeerArgs(
            namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": ns})
        )
        for ns in namespaces
    ]
    return k8s.networking.v1.NetworkPolicySpecArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
        policy_types=["Ingress"],
        ingress=[
            k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                from_=peers, ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=PORT, protocol="TCP")]
            )
        ],
    )
