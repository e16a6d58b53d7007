"""InferenceService's args for a disaggregated service and expert parallel, as Python callers and the
multi-language schema see them (the checked model is serving/model.py's DisaggregationConfig and
ExpertParallelConfig, and service_spec.py's role sizes)."""

from typing import NotRequired, TypedDict


class RoleArgs(TypedDict):
    """One role of a disaggregated service."""

    replicas: NotRequired[int]
    """Replicas of the role (fixed). Defaults to 1."""
    gpus_per_replica: NotRequired[int]
    """GPUs of one replica: vLLM's tensor parallel on one node; with `expert_parallel`, its
    data-parallel ranks' GPUs, whole nodes (`gpus_per_node`) when above one. Defaults to 1."""


class DisaggregationArgs(TypedDict):
    """Prefill and decode as separate vLLM workloads, the KV cache moved from prefill to decode by vLLM's
    NixlConnector."""

    prefill: RoleArgs
    """The prefill role (llm-d advises more replicas with fewer GPUs each than decode)."""
    decode: RoleArgs
    """The decode role, behind llm-d's routing sidecar."""
    kv_transport: NotRequired[str]
    """`rdma` (the pool's GPUDirect RDMA NICs, given by `gpu_nics`) or `tcp` (the Pod network: for
    testing only). Defaults to rdma."""


class ExpertParallelArgs(TypedDict):
    """vLLM's data and expert parallel for a MoE model (with `disaggregation`: llm-d's wide-EP path)."""

    tensor_parallel: NotRequired[int]
    """GPUs of one data-parallel rank. Defaults to 1."""
    all_to_all: NotRequired[str]
    """vLLM's all-to-all: `allgatherReducescatter` (NCCL collectives). The DeepEP backends are refused
    with the reason. Defaults to allgatherReducescatter."""


class PodSizeArgs(TypedDict):
    """A role's Pod size; each defaults to the service's own."""

    cpu: NotRequired[float]
    """CPU of the role's vLLM container (request = limit), in cores."""
    memory_gib: NotRequired[int]
    """Memory of the role's vLLM container (request = limit), in GiB."""
    shm_gib: NotRequired[int]
    """Shared memory (/dev/shm, in RAM), in GiB."""
    disk_gib: NotRequired[int]
    """Writable disk for the home directory, in GiB."""
    weights_cache_gib: NotRequired[int]
    """A gs:// model: the Cloud Storage FUSE file cache of a Pod of the role, in GiB."""
    weights_cache_medium: NotRequired[str]
    """Where that cache lives: `memory` or `disk`."""


class RoleSizesArgs(TypedDict):
    """Each role's Pod size."""

    prefill: NotRequired[PodSizeArgs]
    """The prefill Pods' size."""
    decode: NotRequired[PodSizeArgs]
    """The decode Pods' size."""
