"""InferenceService's args for a disaggregated service and expert parallel, as Python callers and the
multi-language schema see them (the checked model is serving/model.py's DisaggregationConfig and
ExpertParallelConfig, and service_spec.py's role sizes)."""

from __future__ import annotations

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
    all2all: NotRequired[str]
    """vLLM's all-to-all: `allgatherReducescatter` (NCCL collectives). The DeepEP backends are refused
    with the reason. Defaults to allgatherReducescatter."""


class PodSizeArgs(TypedDict):
    """A role's Pod size; each defaults to the service's own."""

    cpu: NotRequired[float]
    memory_gib: NotRequired[int]
    shm_gib: NotRequired[int]
    disk_gib: NotRequired[int]
    weights_cache_gib: NotRequired[int]
    weights_cache_medium: NotRequired[str]


class RoleSizesArgs(TypedDict):
    """Each role's Pod size."""

    prefill: NotRequired[PodSizeArgs]
    decode: NotRequired[PodSizeArgs]
