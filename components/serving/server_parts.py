"""The parts of a vLLM server's Pod that are plain data: its arguments, the bucket's mount options,
who may reach its port, and what its namespace's Pods may reach."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi_kubernetes as k8s

from ..core import images
from ..core.egress import (
    DEFAULT_DENY_EGRESS_POLICY,
    dns_egress_rule,
    egress_policy_spec,
    metadata_server_egress_rules,
    pods_egress_rule,
    public_https_egress_rule,
)
from ..core.k8s import app_labels, image_version, selector_labels
from ..dra.claims import GPU_CLAIM, container_claim, gpu_claim_template_name, pod_claim
from .hyperdisk_ml import claim_volume, uses_hyperdisk_ml
from .roles import API_PORT, served_ports
from .rules import gcs_location, weights_source
from .sizing import file_cache_max_mb

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec

# The OpenAI API's port (a disaggregated service's too: roles.py).
PORT = API_PORT
# The server's container (the GPU duty-cycle autoscaler selects it by name).
CONTAINER = "vllm"
# vLLM's image has a user 2000 in group 0 (home /home/vllm): the one UID the stock image knows
# (docs/serving-research.md 1d); another UID has no passwd entry, and getpass.getuser() fails.
VLLM_USER, VLLM_GROUP = 2000, 0
HOME = "/home/vllm"
WEIGHTS_DIR = "/models"


def gpu_resources(spec: InferenceServiceSpec) -> dict[str, str]:
    """The container's GPU limit from GKE's device plugin; none on a DRA pool (a claim instead)."""
    return {} if spec.dra_gpus else {"nvidia.com/gpu": str(spec.gpus_per_pod)}


def gpu_claims(
    spec: InferenceServiceSpec,
) -> tuple[list[k8s.core.v1.PodResourceClaimArgs] | None, list[k8s.core.v1.ResourceClaimArgs] | None]:
    """On a DRA pool: the Pod's claim of its GPUs, made per Pod from the namespace's template of
    `gpus_per_pod` GPUs (dra/claims.py), and the vLLM container's use of it; else none."""
    if not spec.dra_gpus:
        return None, None
    claim = pod_claim(GPU_CLAIM, gpu_claim_template_name(spec.gpus_per_pod))
    return (
        [
            k8s.core.v1.PodResourceClaimArgs(
                name=claim["name"], resource_claim_template_name=claim["resourceClaimTemplateName"]
            )
        ],
        [k8s.core.v1.ResourceClaimArgs(**container_claim(GPU_CLAIM))],
    )


def server_labels(name: str) -> dict[str, str]:
    """The labels of a service's server Pods (their selector: `selector_labels` of these)."""
    return app_labels(name, component="inference-server", version=image_version(images.VLLM))


def vllm_args(
    spec: InferenceServiceSpec, *, port: int = PORT, tensor_parallel: int | None = None
) -> list[str]:
    """The `vllm serve` arguments (the image's entrypoint): the model, its name, the GPUs, the port;
    for a replica over several nodes, the leader's (a worker adds --headless). A disaggregated role
    gives its own port and tensor-parallel size (role_parts.py)."""
    source = weights_source(spec.model)
    model = f"{WEIGHTS_DIR}" if source == "gcs" else spec.model
    args = [
        model,
        f"--served-model-name={spec.name}",
        f"--tensor-parallel-size={tensor_parallel or spec.gpus_per_pod}",
        "--host=0.0.0.0",
        f"--port={port}",
    ]
    if spec.max_model_len is not None:
        args.append(f"--max-model-len={spec.max_model_len}")
    if spec.gpu_memory_utilization is not None:
        args.append(f"--gpu-memory-utilization={spec.gpu_memory_utilization:g}")
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


# The Cloud Storage FUSE sidecar's limits, lifted ("0": none; the request stays the webhook's default
# unless set): its defaults (250m CPU, 256Mi memory, 5Gi ephemeral storage: gcs-fuse-csi-driver
# cmd/webhook/main.go) throttle parallel downloads. As accelerated-platforms' vLLM manifests
# (inference-ref-arch online-inference-gpu/vllm/base/deployment.yaml) and the driver's
# troubleshooting guide ("0" lets it use what the node has).
SIDECAR_UNLIMITED = {
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
}


def pod_annotations(spec: InferenceServiceSpec) -> dict[str, str] | None:
    """The server Pod's annotations: GKE injects the Cloud Storage FUSE sidecar into a bucket's reader
    (without limits, and with the file cache's room requested)."""
    if weights_source(spec.model) != "gcs" or uses_hyperdisk_ml(spec.weights):
        return None
    annotations = {"gke-gcsfuse/volumes": "true", **SIDECAR_UNLIMITED}
    if spec.weights_cache_gib:
        annotations.update(file_cache_annotations(spec.weights_cache_gib, spec.weights_cache_medium))
    return annotations


def mount_options(path: str, *, file_cache_gib: int = 0) -> str:
    """Cloud Storage FUSE options for read-only weights: only the model's directory, owned by vLLM's
    user, with the metadata cached for the mount's life (weights do not change under a running
    server); with a file cache, files are cached whole, fetched in parallel chunks (parallel downloads
    need the file cache) and kept for range reads too. From Google's vLLM reference
    (docs/serving-research.md 4c); the cache's size is file_cache_max_mb, within its volume."""
    options = [
        f"only-dir={path}",
        "implicit-dirs",
        f"uid={VLLM_USER}",
        f"gid={VLLM_GROUP}",
        "metadata-cache:ttl-secs:-1",
        "metadata-cache:stat-cache-max-size-mb:-1",
        "metadata-cache:type-cache-max-size-mb:-1",
    ]
    if file_cache_gib:
        options += [
            f"file-cache:max-size-mb:{file_cache_max_mb(file_cache_gib)}",
            "file-cache:cache-file-for-range-read:true",
            "file-cache:enable-parallel-downloads:true",
        ]
    return ",".join(options)


def weights_volumes(spec: InferenceServiceSpec, name: str) -> list[k8s.core.v1.VolumeArgs]:
    """A gs:// model's weights volume `name`: the bucket through the Cloud Storage FUSE CSI driver
    (with its file cache's volume, if any), or the service's filled Hyperdisk ML claim."""
    if uses_hyperdisk_ml(spec.weights):
        return [claim_volume(spec, name)]
    bucket, path = gcs_location(spec.model)
    volumes = [
        k8s.core.v1.VolumeArgs(
            name=name,
            csi=k8s.core.v1.CSIVolumeSourceArgs(
                driver="gcsfuse.csi.storage.gke.io",
                read_only=True,
                volume_attributes={
                    "bucketName": bucket,
                    "mountOptions": mount_options(path, file_cache_gib=spec.weights_cache_gib),
                },
            ),
        )
    ]
    if spec.weights_cache_gib:
        volumes.append(file_cache_volume(spec.weights_cache_gib, spec.weights_cache_medium))
    return volumes


# The volume the Cloud Storage FUSE sidecar keeps its file cache in, when the Pod declares one by this
# name (gcs-fuse-csi-driver pkg/webhook/sidecar_spec.go); otherwise the sidecar's own small emptyDir.
FILE_CACHE_VOLUME = "gke-gcsfuse-cache"


def file_cache_volume(size_gib: int, medium: str) -> k8s.core.v1.VolumeArgs:
    """The file cache's emptyDir: in memory (tmpfs) or on the node's disk (Local SSD, when the pool
    puts ephemeral storage there), at most `size_gib`."""
    return k8s.core.v1.VolumeArgs(
        name=FILE_CACHE_VOLUME,
        empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(
            medium="Memory" if medium == "memory" else None, size_limit=f"{size_gib}Gi"
        ),
    )


def file_cache_annotations(size_gib: int, medium: str) -> dict[str, str]:
    """The sidecar's request for a file cache: its pages (tmpfs) or its files (disk) are charged to the
    sidecar, which writes them (its limit is lifted: SIDECAR_UNLIMITED; the volume's sizeLimit bounds
    the cache), so its request reserves the cache on the node."""
    if medium == "memory":
        return {"gke-gcsfuse/memory-request": f"{size_gib}Gi"}
    return {"gke-gcsfuse/ephemeral-storage-request": f"{size_gib}Gi"}


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
            from_=peers,
            ports=[
                k8s.networking.v1.NetworkPolicyPortArgs(port=port, protocol="TCP")
                for port in served_ports(spec)
            ],
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


def egress_policies(
    spec: InferenceServiceSpec, labels: dict[str, str]
) -> list[tuple[str, str, k8s.networking.v1.NetworkPolicySpecArgs]]:
    """The service namespace's egress policies, as (resource suffix, name, spec), core/egress.py:
    - `default-deny-egress`: every Pod of the namespace reaches GKE's DNS and nothing else unless a
      policy of its own allows it (the load test's, the endpoint picker's);
    - `<name>-server-egress`: the server's Pods also reach each other on any port (a replica over
      several nodes), and what reading the weights needs: HTTPS to public addresses (Google's APIs for
      Cloud Storage FUSE, Hugging Face's CDN) and, for a bucket, the metadata server (Workload
      Identity); with Hyperdisk ML they read a disk and need neither;
    - `weights-transfer-egress` (Hyperdisk ML): the metadata server and HTTPS for every Pod of the
      namespace, for the GKE Volume Populator's transfer Job, which runs as the namespace's
      `weights-transfer` account (whether its Pod runs in this namespace, and with which labels, is
      UNVERIFIED: the rule is namespace-wide so the transfer works either way)."""
    source = weights_source(spec.model)
    hyperdisk = uses_hyperdisk_ml(spec.weights)
    own = selector_labels(labels)
    server: list[k8s.networking.v1.NetworkPolicyEgressRuleArgs] = []
    if spec.nodes_per_replica > 1:
        server.append(pods_egress_rule(own))
    if source == "huggingface" or (source == "gcs" and not hyperdisk):
        server.append(public_https_egress_rule())
    if source == "gcs" and not hyperdisk:
        server += metadata_server_egress_rules()
    policies = [
        ("default-deny-egress", DEFAULT_DENY_EGRESS_POLICY, egress_policy_spec([dns_egress_rule()])),
        ("server-egress", f"{spec.name}-server-egress", egress_policy_spec(server, own)),
    ]
    if source == "gcs" and hyperdisk:
        transfer = [public_https_egress_rule(), *metadata_server_egress_rules()]
        policies.append(("weights-transfer-egress", "weights-transfer-egress", egress_policy_spec(transfer)))
    return policies
