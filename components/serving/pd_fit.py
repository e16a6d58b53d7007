"""Whether a model fits each role of a disaggregated service, for the stack file and InferenceService
alike (KeyNames): each role's tensor-parallel size against the model's heads, the two roles' sizes
against each other as the NixlConnector reads KV across them, and the GPUs' memory; with expert
parallel, the model's experts and the share of them, and of the rest, the heaviest GPU holds.

Sources (vLLM 0.33.0, the pinned image's):
- kv_connector/utils.py `tp_ratio`: decode's and prefill's tensor-parallel sizes divide one another;
  v1/nixl/base_worker.py: "num_kv_heads > tp_size with P_TP > D_TP not supported for non-mamba" (a
  prefill TP above the KV heads, replicating them, with decode's smaller), MLA excepted;
  docs/features/nixl_connector_compatibility.md (heterogeneous TP supported for dense and MoE models).
- llm-d v0.9.0 docs/operations/disaggregation/vllm.md: "always keep decode TP >= prefill TP" (a note
  here where the code allows more).
- docs/serving/expert_parallel_deployment.md ("EP_SIZE = TP_SIZE x DP_SIZE"; expert parallel is for
  MoE models); model_executor/layers/fused_moe/expert_map_manager.py (the experts spread "as evenly as
  possible", the remainder one each to the first ranks, so the heaviest rank holds ceil(E / EP));
  layer.py (only EPLB, not built here, needs E divisible by EP).
- The weights outside the routed experts (attention, dense layers, shared experts, embeddings) are on
  every data-parallel rank, split over its tensor-parallel GPUs; one sequence's KV cache is on one
  rank, split over its GPUs (serving/kv_cache.py).

Every figure is a lower bound (model_catalog.py), so a refusal is always right."""

from __future__ import annotations

import math

from ..core.catalog import Accelerator
from ..core.common import KeyNames, Problems
from .fit import GPU_MEMORY_UTILIZATION, Replica, check_gpu_memory, check_tensor_parallel, gib, replica_need
from .model import ModelServerSettings
from .model_catalog import ModelFacts
from .pd_rules import role_key
from .roles import RoleLayout

# The expert-parallel replica sizes a refusal suggests, up to ModelServerSettings' 64 GPUs.
MOST_GPUS = 64


class RoleKeys(KeyNames):
    """The service's keys, a replica's size and count at its role's (`disaggregation.prefill.
    gpusPerReplica`, `...replicas`), so the serving rules written for one workload name a role's own."""

    ROLE_FIELDS = frozenset({"gpus_per_replica", "replicas"})

    def __init__(self, names: KeyNames, role: str) -> None:
        super().__init__(names.prefix, camel=names.camel)
        self.role = role

    def key(self, name: str) -> str:
        field = name.split(".", 1)[0]
        return super().key(f"disaggregation.{self.role}.{field}" if field in self.ROLE_FIELDS else name)

    def at(self, name: str) -> str:
        return f"{self.prefix}.{self.key(name)}" if self.prefix else self.key(name)


def role_names(names: KeyNames, role: str) -> RoleKeys:
    """Keys of a role (RoleKeys)."""
    return RoleKeys(names, role)


def expert_rank_bytes(facts: ModelFacts, gpus: int, tensor_parallel: int) -> int | None:
    """The weights on the heaviest GPU of an expert-parallel replica of `gpus` GPUs (data-parallel ranks
    of `tensor_parallel` GPUs): the rest of the model split over a rank's GPUs, and ceil(experts / gpus)
    experts. Where the experts' share is not known, the weights spread over every GPU (no GPU holds
    less than the mean). None where the weights are not known."""
    total = facts.least_weights_bytes
    if total is None:
        return None
    experts, expert_bytes = facts.experts, facts.expert_bytes
    if experts is None or expert_bytes is None or expert_bytes > total:
        return math.ceil(total / gpus)
    rest = total - expert_bytes
    return rest // tensor_parallel + expert_bytes * math.ceil(experts / gpus) // experts


def expert_rank_need(
    facts: ModelFacts, max_model_len: int | None, gpus: int, tensor_parallel: int, accelerator: Accelerator
) -> int | None:
    """The heaviest GPU's weights and one sequence's KV cache (on one rank's GPUs), at the least."""
    need = replica_need(facts, max_model_len, tensor_parallel, accelerator)
    weights = expert_rank_bytes(facts, gpus, tensor_parallel)
    if need is None or weights is None:
        return None
    return weights + need[1] // tensor_parallel


def expert_rank_fits(
    facts: ModelFacts,
    max_model_len: int | None,
    utilization: float,
    gpus: int,
    tensor_parallel: int,
    accelerator: Accelerator,
) -> bool:
    need = expert_rank_need(facts, max_model_len, gpus, tensor_parallel, accelerator)
    return need is None or need <= int(accelerator.gpu_memory_bytes * utilization)


def check_roles_fit(
    settings: ModelServerSettings,
    facts: ModelFacts,
    layouts: list[RoleLayout],
    accelerator: Accelerator | None,
    names: KeyNames,
    problems: Problems,
    notes: list[str] | None,
    *,
    gpus_per_node: int | None,
) -> None:
    """What knowing the model decides on each role (`accelerator`: the GPU, None where not known)."""
    if not layouts:
        return
    if settings.expert_parallel is not None:
        if not _check_experts(facts, layouts, names, problems, notes):
            return
        check_tensor_parallel(
            facts, layouts[0].tensor_parallel, names, problems, key="expert_parallel.tensor_parallel"
        )
    else:
        for layout in layouts:
            check_tensor_parallel(facts, layout.tensor_parallel, role_names(names, layout.role), problems)
        _check_tensor_parallel_pair(facts, layouts, names, problems, notes)
    if accelerator is None:
        return
    for layout in layouts:
        if layout.expert_parallel:
            _check_expert_memory(settings, facts, layout, accelerator, names, problems, gpus_per_node)
        else:
            replica = Replica(
                gpus=layout.gpus, tensor_parallel=layout.tensor_parallel, accelerator=accelerator
            )
            check_gpu_memory(
                settings,
                facts,
                replica,
                accelerator,
                layout.tensor_parallel,
                role_names(names, layout.role),
                problems,
            )


def _check_experts(
    facts: ModelFacts, layouts: list[RoleLayout], names: KeyNames, problems: Problems, notes: list[str] | None
) -> bool:
    """Expert parallel is for a MoE model; a replica's GPUs are at most its experts. Whether the
    experts' rules ran."""
    key = names.at("expert_parallel")
    if facts.moe is False:
        problems.add(
            key,
            f"not allowed for {facts.name}, a dense model: expert parallel spreads a MoE model's experts "
            "over the GPUs (vLLM's --enable-expert-parallel); serve it disaggregated without it",
        )
        return False
    if facts.experts is None:
        if notes is not None:
            notes.append(
                f"note: {key}: whether {facts.name} has experts, and how many, is not known here: the "
                f"expert-parallel ranks are not checked against them (state "
                f"{names.key('model_info.experts')})"
            )
        return True
    uneven = []
    for layout in layouts:
        if layout.gpus > facts.experts:
            problems.add(
                names.at(role_key(layout.role)),
                f"{layout.gpus} expert-parallel ranks are more than {facts.name}'s {facts.experts} experts a "
                "layer: a rank would hold none; use at most "
                f"{facts.experts}",
            )
        elif facts.experts % layout.gpus:
            uneven.append(f"{layout.role} {layout.gpus}")
    if uneven and notes is not None:
        notes.append(
            f"note: {key}: {facts.name}'s {facts.experts} experts do not divide evenly over the ranks "
            f"({', '.join(uneven)}): vLLM gives the first ranks one more each (its expert map), and the "
            "GPUs' memory is checked for the heaviest"
        )
    return True


def _check_tensor_parallel_pair(
    facts: ModelFacts, layouts: list[RoleLayout], names: KeyNames, problems: Problems, notes: list[str] | None
) -> None:
    """Prefill's and decode's tensor-parallel sizes, as decode's NixlConnector reads prefill's KV."""
    prefill, decode = (layout.tensor_parallel for layout in layouts)
    key = names.at(role_key("decode"))
    if max(prefill, decode) % min(prefill, decode):
        problems.add(
            key,
            f"{decode} and prefill's {prefill} GPUs do not divide one another: vLLM's NixlConnector maps "
            "decode's tensor-parallel ranks onto prefill's by their ratio (kv_connector/utils.py "
            "tp_ratio)",
        )
        return
    if prefill <= decode:
        return
    kv = facts.kv_head_count
    if facts.attention.type != "mla" and kv is not None and prefill > kv:
        problems.add(
            key,
            f"{decode} is below prefill's {prefill} GPUs, which replicate {facts.name}'s {kv} KV heads: "
            "vLLM's NixlConnector does not read a replicated KV cache into fewer decode ranks "
            "(v1/nixl/base_worker.py); give decode at least prefill's GPUs",
        )
    elif notes is not None:
        notes.append(
            f"note: {key}: {decode} is below prefill's {prefill}: vLLM takes it, llm-d advises decode's "
            "tensor parallel at least prefill's (fewer, wider decode replicas)"
        )


def _check_expert_memory(
    settings: ModelServerSettings,
    facts: ModelFacts,
    layout: RoleLayout,
    accelerator: Accelerator,
    names: KeyNames,
    problems: Problems,
    gpus_per_node: int | None,
) -> None:
    """The heaviest GPU's weights and one sequence's KV cache within what vLLM may use of it."""
    utilization = settings.gpu_memory_utilization or GPU_MEMORY_UTILIZATION
    tp, length = layout.tensor_parallel, settings.max_model_len
    need = expert_rank_need(facts, length, layout.gpus, tp, accelerator)
    usable = int(accelerator.gpu_memory_bytes * utilization)
    if need is None or need <= usable:
        return
    node = gpus_per_node or layout.gpus
    sizes = [n for n in range(node, MOST_GPUS + 1, node) if n > layout.gpus]
    larger = next(
        (n for n in sizes if expert_rank_fits(facts, length, utilization, n, tp, accelerator)), None
    )
    how = f"use {larger} GPUs" if larger else f"{MOST_GPUS} GPUs would not hold it either"
    share = "its share of the experts" if facts.expert_bytes is not None else "a mean share of the weights"
    problems.add(
        names.at(role_key(layout.role)),
        f"{layout.gpus} {accelerator.name} GPUs of expert parallel (tensor parallel {tp}) leave the heaviest "
        f"GPU {gib(need)} of {facts.name} ({share}, the rest of the model over its rank's GPUs, one "
        f"sequence's KV cache) against {gib(usable)} vLLM may use of it ({accelerator.gpu_memory_basis}, "
        f"{utilization:g}); {how}" + (f", or a shorter {names.key('max_model_len')}" if length else ""),
    )


__all__ = ["check_roles_fit", "expert_rank_bytes", "expert_rank_fits", "role_names"]
