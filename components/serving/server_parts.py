"""The parts of a vLLM server's Pod that are plain data: its arguments, the bucket's mount options,
and who may reach its port."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi_kubernetes as k8s

from ..core.k8s import selector_labels
from .rules import weights_source

if TYPE_CHECKING:
    from .inference_service import InferenceServiceSpec

PORT = 8000
# vLLM's image has a user 2000 in group 0 (home /home/vllm): the one UID the stock image knows
# (docs/serving-research.md 1d); another UID has no passwd entry, and getpass.getuser() fails.
VLLM_USER, VLLM_GROUP = 2000, 0
HOME = "/home/vllm"
WEIGHTS_DIR = "/models"


def vllm_args(spec: InferenceServiceSpec) -> list[str]:
    """The `vllm serve` arguments (the image's entrypoint): the model, its name, the GPUs, the port;
    for a replica over several nodes, the leader's (a worker adds --headless)."""
    source = weights_source(spec.model)
    model = f"{WEIGHTS_DIR}" if source == "gcs" else spec.model
    args = [
        model,
        f"--served-model-name={spec.name}",
        f"--tensor-parallel-size={spec.gpus_per_pod}",
        "--host=0.0.0.0",
        f"--port={PORT}",
    ]
    if spec.max_model_len is not None:
        args.append(f"--max-model-len={spec.max_model_len}")
    if source == "huggingface":
        args.append(f"--download-dir={HOME}/.cache/huggingface")
    if spec.nodes_per_replica > 1:
        # Pipeline parallel across the nodes (vLLM's advice past one node) without Ray, which the
        # image's build does not install: vLLM's multiprocessing backend, one rank per node. Each
        # Pod's rank and the leader's address are the variables LeaderWorkerSet puts in its Pods,
        # which the kubelet expands in args (docs/serving.md, "Multi-node replicas").
        nodes = spec.nodes_per_replica
        args += [
            f"--pipeline-parallel-size={nodes}",
            "--distributed-executor-backend=mp",
            f"--nnodes={nodes}",
            "--node-rank=$(LWS_WORKER_INDEX)",
            "--master-addr=$(LWS_LEADER_ADDRESS)",
        ]
    return args


def pod_annotations(spec: InferenceServiceSpec) -> dict[str, str] | None:
    """The server Pod's annotations: GKE injects the Cloud Storage FUSE sidecar into a bucket's reader."""
    return {"gke-gcsfuse/volumes": "true"} if weights_source(spec.model) == "gcs" else None


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
    """Ingress to the API port from the namespace itself, the client namespaces and GMP's scraper; for
    a replica over several nodes, also between the service's own Pods on any port (torch.distributed's
    store on the leader, vLLM's and NCCL's sockets between the nodes)."""
    namespaces = [*spec.client_namespaces, "gmp-system"]
    peers = [k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs())] + [
        k8s.networking.v1.NetworkPolicyPeerArgs(
            namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": ns})
        )
        for ns in namespaces
    ]
    ingress = [
        k8s.networking.v1.NetworkPolicyIngressRuleArgs(
            from_=peers, ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=PORT, protocol="TCP")]
        )
    ]
    if spec.nodes_per_replica > 1:
        own = k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels))
        ingress.append(
            k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                from_=[k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=own)]
            )
        )
    return k8s.networking.v1.NetworkPolicySpecArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
        policy_types=["Ingress"],
        ingress=ingress,
    )
