"""The serving section (the stack file's `gke-gpu:serving`): one entry per model server."""

from __future__ import annotations

import re
from typing import Annotated, Literal, get_args

from pydantic import Field

from ..core.arg_types import matching
from ..core.common import DNS_SUBDOMAIN, K8S_NAME
from ..core.model import DNS_LABEL, StackModel, example

# A service's namespace is `serve-<name>` (at most 63): 40 characters leave room for it. Its Google
# service account id is `sv-<name, cut>-<hash>` (weights_reader.service_account_id).
MAX_SERVICE_NAME = 40
MAX_SERVICES = 20
# gs://<bucket>/<path>: a bucket name (3-63 lowercase letters, digits, '-', '_', '.') and a path.
# The path: letters, digits, '.', '_', '-' and '/' (no ',' that would end a mount option).
GCS_MODEL = re.compile(
    r"gs://(?P<bucket>(?!goog)[a-z0-9](?:[a-z0-9_-]|\.(?!\.)){1,61}[a-z0-9])(?:/(?P<path>[A-Za-z0-9._/-]*))?"
)
# A Hugging Face model id: <owner>/<name> (letters, digits, '-', '_', '.').
HF_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")

# A container image reference: [host[:port]/]path[:tag][@sha256:digest], lowercase path (OCI distribution).
IMAGE_REFERENCE = re.compile(
    r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(@sha256:[0-9a-f]{64})?"
)
IMAGE_MEANING = "a container image such as us-central1-docker.pkg.dev/<project>/<repository>/<path>:<tag>"

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

HF_TOKEN_SECRET_MEANING = (
    "the name of a Kubernetes Secret (lowercase letters, digits, '-' and '.'), not the token itself: "
    "the Secret lives in the service's namespace serve-<name> and its key `token` holds the token; "
    "create it with `kubectl create secret generic hf-token -n serve-<name> "
    '--from-literal=token="$HF_TOKEN"` and set hfTokenSecret: hf-token'
)
# Field(min_length=1) first: an empty name says "cannot be empty", as every other key's does.
HfTokenSecretName = Annotated[
    str, Field(min_length=1), *get_args(matching(DNS_SUBDOMAIN, HF_TOKEN_SECRET_MEANING, max_length=253))[1:]
]
SERVICE_NAME_MEANING = "lowercase letters, digits and hyphens, starting with a letter"


# A Hyperdisk ML volume's size: 4 GiB to 64 TiB (Compute Engine, "About Hyperdisk ML"), and "larger
# than 4 Gi" for the GKE Volume Populator (its Hyperdisk ML how-to): at least 5.
MIN_VOLUME_GIB, MAX_VOLUME_GIB = 5, 65_536
# Provisioned throughput: 400 to 1,200,000 MiB/s (Compute Engine, "About Hyperdisk ML").
MIN_THROUGHPUT_MIBPS, MAX_THROUGHPUT_MIBPS = 400, 1_200_000


class WeightsConfig(StackModel):
    """How a gs:// model's files reach the server: mounted from the bucket through the Cloud Storage
    FUSE CSI driver (the default), or copied once into a read-only-many Hyperdisk ML volume that every
    replica mounts (components/serving/hyperdisk_ml.py)."""

    model_config = example(via="hyperdiskMl", sizeGib=200)

    via: Literal["cloudStorageFuse", "hyperdiskMl"] = "cloudStorageFuse"
    # hyperdiskMl: the volume's size (larger than the model's files) and its provisioned throughput.
    size_gib: int | None = Field(None, ge=MIN_VOLUME_GIB, le=MAX_VOLUME_GIB)
    throughput_mi_bps: int | None = Field(None, ge=MIN_THROUGHPUT_MIBPS, le=MAX_THROUGHPUT_MIBPS)


class ModelInfo(StackModel):
    """What the serving rules need to know of a model the catalogue does not hold (components/data/
    models.yaml): a catalogue entry it is a copy of (a gs:// path holding a catalogued model), or its
    own figures, from its config.json."""

    model_config = example(catalog="Qwen/Qwen2.5-7B-Instruct")

    # A catalogued Hugging Face id whose figures apply (the model's files copied into a bucket).
    catalog: Annotated[str, Field(min_length=3, max_length=193)] | None = None
    parameters: int | None = Field(None, ge=1_000_000, le=100_000_000_000_000)
    dtype: Literal["bfloat16", "float16", "float32", "fp8", "int8", "mxfp4", "int4"] | None = None
    # config.json's num_attention_heads and num_key_value_heads (the latter defaults to the former).
    attention_heads: int | None = Field(None, ge=1, le=4096)
    kv_heads: int | None = Field(None, ge=1, le=4096)
    # num_hidden_layers and head_dim: with kvHeads, the KV cache a token takes.
    layers: int | None = Field(None, ge=1, le=4096)
    head_dim: int | None = Field(None, ge=1, le=4096)
    # max_position_embeddings: the longest maxModelLen vLLM takes.
    max_context: int | None = Field(None, ge=16, le=100_000_000)
    # Whether the Hugging Face repo asks to accept terms (then hfTokenSecret is required).
    gated: bool | None = None
    # A MoE model: its routed experts a layer (config.json's n_routed_experts / num_local_experts /
    # num_experts), and their parameters over every layer (for each expert-parallel rank's share).
    experts: int | None = Field(None, ge=1, le=4096)
    expert_parameters: int | None = Field(None, ge=1_000_000, le=100_000_000_000_000)


# The roles of a disaggregated service (llm-d's `llm-d.ai/role` values, which its endpoint picker's
# prefill-filter and decode-filter select on: llm-d/llm-d-router@v0.10.0
# pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go).
PREFILL, DECODE = "prefill", "decode"
ROLES = (PREFILL, DECODE)


class RoleConfig(StackModel):
    """One role of a disaggregated service: its replicas and the GPUs of one replica (vLLM's tensor
    parallel size on one node; with expertParallel, its data x tensor parallel ranks, whole nodes when
    above a node)."""

    model_config = example(replicas=2, gpusPerReplica=4)

    replicas: int = Field(1, ge=1, le=100)
    gpus_per_replica: int = Field(1, ge=1, le=64)


class DisaggregationConfig(StackModel):
    """Prefill and decode as separate vLLM workloads, the KV cache moved from prefill to decode by vLLM's
    NixlConnector, the llm-d routing sidecar on decode and the endpoint picker's P/D profiles in front
    (docs/serving.md, "Disaggregated prefill and decode")."""

    model_config = example(prefill={"replicas": 2, "gpusPerReplica": 4}, decode={"gpusPerReplica": 8})

    prefill: RoleConfig
    decode: RoleConfig
    # How the KV cache travels: over the pool's GPUDirect RDMA NICs (`rdma`, the default), or the Pod
    # network's TCP (`tcp`: NIXL's UCX falls back to TCP; llm-d: "only for testing and development").
    kv_transport: Literal["rdma", "tcp"] = "rdma"


class ExpertParallelConfig(StackModel):
    """vLLM's data and expert parallel for a MoE model, as llm-d's wide-EP guide runs it: each replica's
    GPUs are data-parallel ranks of `tensorParallel` GPUs, the experts spread over all of them."""

    model_config = example(tensorParallel=1, allToAll="allgatherReducescatter")

    # GPUs of one data-parallel rank (its attention's tensor parallel).
    tensor_parallel: int = Field(1, ge=1, le=8)
    # vLLM's --all2all-backend: allgather_reducescatter (NCCL collectives, vLLM's default) is built;
    # the DeepEP ones are refused with the reason (serving/pd_rules.py).
    all_to_all: Literal["allgatherReducescatter", "deepepHighThroughput", "deepepLowLatency"] = (
        "allgatherReducescatter"
    )


class ReplicasConfig(StackModel):
    model_config = example(min=1, max=3)

    min: int = Field(1, ge=0, le=100)
    max: int = Field(1, ge=1, le=100)


class ModelServerSettings(StackModel):
    """What a model server runs: one model for the stack file's `serving` entries (camelCase keys)
    and InferenceService's args (snake_case names)."""

    # gs://<bucket>/<path to the model's files>, or a Hugging Face id <owner>/<name>.
    model: Annotated[str, Field(min_length=1, max_length=1024)]
    server: Literal["vllm"] = "vllm"
    # The GPUs of one replica: on one node (vLLM's tensor parallel size), or on several whole nodes
    # (tensor parallel within each node, pipeline parallel across them: a LeaderWorkerSet), up to
    # 8 nodes of 8 GPUs.
    gpus_per_replica: int = Field(1, ge=1, le=64)
    # A gated Hugging Face model: the Secret (in the service's namespace) whose key `token` is the token.
    hf_token_secret: HfTokenSecretName | None = None
    # vLLM's --max-model-len (the context the KV cache is sized for); default: the model's own.
    max_model_len: int | None = Field(None, ge=16, le=10_000_000)
    # With a replica range: what the autoscaler scales on, vLLM's waiting requests (`queue`, the
    # default) or the GPUs' duty cycle (`gpu`).
    scale_on: Literal["queue", "gpu"] | None = None
    # Namespaces whose Pods may call the service (besides its own).
    client_namespaces: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL)]],
        Field(default_factory=list, max_length=20),
    ]
    # A gs:// model: Cloud Storage FUSE (the default) or a Hyperdisk ML volume.
    weights: WeightsConfig = WeightsConfig.model_construct()
    # vLLM's --gpu-memory-utilization: the share of each GPU's memory vLLM takes (weights, activations,
    # KV cache); default vLLM's own (GPU_MEMORY_UTILIZATION).
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    # A model the catalogue does not hold: its figures (or the catalogue entry it is a copy of).
    model_info: ModelInfo | None = None
    # Prefill and decode as separate workloads (P/D disaggregation).
    disaggregation: DisaggregationConfig | None = None
    # A MoE model's data and expert parallel (with disaggregation: llm-d's wide-EP path).
    expert_parallel: ExpertParallelConfig | None = None


class _ServiceChoice(StackModel):
    name: matching(K8S_NAME, SERVICE_NAME_MEANING, max_length=MAX_SERVICE_NAME)  # type: ignore[valid-type]
    pool: Annotated[str, Field(min_length=1, max_length=100)]


class ServingConfig(ModelServerSettings, _ServiceChoice):
    """A `gke-gpu:serving` entry: which pool serves the model, and how it scales."""

    model_config = example(name="chat", pool="l4", model="gs://my-bucket/models/qwen2.5-7b", gpusPerReplica=1)

    replicas: ReplicasConfig = ReplicasConfig.model_construct()
    gateway: bool = False

    @property
    def namespace(self) -> str:
        return service_namespace(self.name)


def service_namespace(name: str) -> str:
    """The namespace of a service: its own, `serve-<name>`."""
    return f"serve-{name}"
