"""Whether a model fits the replica that serves it, for the stack file's `serving` entries and
InferenceService's args alike (only the key names differ: KeyNames): what knowing the model decides
(check_model: the token a gated model needs, a tensor-parallel size vLLM accepts, a context within the
model's, weights that fit the disk they are downloaded to), then the GPUs' memory as vLLM counts it at
start: the weights plus the KV cache of one sequence of max_model_len (serving/kv_cache.py) within
--gpu-memory-utilization of the replica's GPUs.

Every figure is a lower bound, so a refusal is always right; where a figure is missing, what it alone
decides is not checked, and a note says which checks did not run and which model_info keys would let
them."""

from __future__ import annotations

from typing import NamedTuple

from ..core.catalog import Accelerator, load_catalog
from ..core.common import KeyNames, Problems, cut, listing
from .kv_cache import kv_cache_bytes, missing_kv_figures, tokens_in_flight
from .model import ModelInfo, ModelServerSettings
from .model_catalog import LEAST_WEIGHT_BYTES, ModelFacts, catalogue, model_facts
from .rules import weights_source

# vLLM's default --gpu-memory-utilization (vllm/config/cache.py, CacheConfig.gpu_memory_utilization).
GPU_MEMORY_UTILIZATION = 0.92
GIB = 1024**3


def gib(size: float) -> str:
    return f"{size / GIB:.1f} GiB"


def check_model_info(settings: ModelServerSettings, names: KeyNames, problems: Problems) -> bool:
    """`model_info` names a catalogued model or states figures, not both, and its heads are whole groups;
    whether it is usable."""
    info = settings.model_info
    if info is None:
        return True
    stated = sorted(names.key(f) for f, v in info.model_dump(exclude={"catalog"}).items() if v is not None)
    if info.catalog is not None:
        if info.catalog.lower() not in catalogue():
            problems.add(
                names.at("model_info.catalog"),
                f"{cut(info.catalog)} is not in the catalogue; catalogued: "
                f"{listing(m.name for m in catalogue().values())} (or state the model's own figures instead)",
            )
            return False
        if stated:
            problems.add(
                names.at("model_info"),
                f"states {', '.join(stated)} as well as catalog {cut(info.catalog)}: the catalogue's figures "
                "apply; leave catalog out to state the model's own",
            )
            return False
        return True
    if not stated:
        problems.add(
            names.at("model_info"),
            "states nothing: give catalog (a catalogued model's Hugging Face id) or the model's figures "
            "from its config.json (parameters, dtype, attentionHeads, kvHeads, layers, headDim, maxContext, "
            "gated)",
        )
        return False
    heads, kv = info.attention_heads, info.kv_heads
    if kv is not None and heads is None:
        problems.add(names.at("model_info.kv_heads"), "only allowed with attentionHeads (the query heads)")
        return False
    if heads is not None and kv is not None and (kv > heads or heads % kv):
        problems.add(
            names.at("model_info.kv_heads"),
            f"{kv} does not divide attentionHeads {heads} (each KV head serves a whole group of query heads)",
        )
        return False
    return _check_expert_parameters(info, names, problems)


def _check_expert_parameters(info: ModelInfo, names: KeyNames, problems: Problems) -> bool:
    """expertParameters counts only with experts and dtype (each expert-parallel rank's share of the
    weights is their parameters in dtype), and is part of the model's parameters."""
    experts = info.expert_parameters
    if experts is None:
        return True
    missing = [names.key(k) for k, v in (("experts", info.experts), ("dtype", info.dtype)) if v is None]
    if missing:
        problems.add(
            names.at("model_info.expert_parameters"),
            f"only counted with {' and '.join(missing)} (the routed experts' share of each expert-parallel "
            "rank's weights is their parameters in dtype): state them, or leave expertParameters out",
        )
        return False
    if info.parameters is not None and experts > info.parameters:
        problems.add(
            names.at("model_info.expert_parameters"),
            f"{experts} is more than parameters {info.parameters}: the routed experts' parameters are part "
            "of the model's",
        )
        return False
    return True


def check_model(
    settings: ModelServerSettings,
    tensor_parallel: int | None,
    names: KeyNames,
    problems: Problems,
    notes: list[str] | None = None,
    *,
    download_gib: int | None = None,
    download_fix: str = "",
) -> ModelFacts | None:
    """What knowing the model decides, for a replica whose Pods each run `tensor_parallel` GPUs (None:
    not known, not checked): the token, the tensor-parallel size, the context, and the disk a Hugging
    Face model is downloaded to (`download_gib`; `download_fix` says how to grow it). Returns the
    model's facts, where known."""
    if not check_model_info(settings, names, problems):
        return None
    facts = model_facts(settings)
    huggingface = weights_source(settings.model) == "huggingface"
    if facts is None:
        if notes is not None:
            notes.append(
                f"note: {names.at('model')}: {cut(settings.model)} is not in the model catalogue and has no "
                f"{names.key('model_info')}: its size, heads and context are not checked (state "
                f"{names.key('model_info')} with its config.json's figures, or the catalogued model it is a "
                "copy of)"
            )
        return None
    _check_token(settings, facts, names, problems, notes, huggingface=huggingface)
    if tensor_parallel is not None:
        check_tensor_parallel(facts, tensor_parallel, names, problems)
    context = facts.max_context
    if settings.max_model_len is not None and context is not None and settings.max_model_len > context:
        problems.add(
            names.at("max_model_len"),
            f"{settings.max_model_len} is more than {facts.name}'s context, {context} tokens (config.json's "
            f"max_position_embeddings), which vLLM refuses to exceed; use at most {context}",
        )
    weights = facts.least_weights_bytes
    if download_gib is not None and huggingface and weights is not None and weights > download_gib * GIB:
        size = gib(weights) if facts.weights_bytes is not None else f"at least {gib(weights)}"
        problems.add(
            names.at("model"),
            f"{facts.name}'s weights, {size}, do not fit the {download_gib} GiB the server downloads "
            f"them to{download_fix}, or serve the model from a gs:// bucket",
        )
    return facts


def _check_token(
    settings: ModelServerSettings,
    facts: ModelFacts,
    names: KeyNames,
    problems: Problems,
    notes: list[str] | None,
    *,
    huggingface: bool,
) -> None:
    """A gated Hugging Face repo needs a token; a public one none; where it is not known, a note."""
    if not huggingface or settings.hf_token_secret is not None:
        return
    if facts.gated:
        problems.add(
            names.at("hf_token_secret"),
            f"required: {facts.name} is gated on Hugging Face (its terms must be accepted); give the name "
            "of a Secret in the service's namespace whose key `token` holds a token of an account that "
            "accepted them (kubectl create secret generic hf-token -n serve-<name> "
            '--from-literal=token="$HF_TOKEN")',
        )
    elif facts.gated is None and notes is not None:
        notes.append(
            f"note: {names.at('hf_token_secret')}: whether {facts.name} is gated is not known here; if it "
            "is, the download fails (401) until hfTokenSecret names a Secret holding a token"
        )


def tensor_parallel_sizes(facts: ModelFacts, most: int) -> list[int]:
    """The tensor-parallel sizes up to `most` vLLM accepts for the model: each divides the attention
    heads, and divides or is a multiple of the KV heads (vLLM's QKVParallelLinear replicates KV heads
    over the GPUs when there are fewer of them)."""
    heads, kv = facts.attention_heads, facts.kv_head_count
    assert heads is not None and kv is not None
    return [
        tp for tp in range(1, most + 1) if heads % tp == 0 and (kv % tp == 0 if tp < kv else tp % kv == 0)
    ]


def check_tensor_parallel(
    facts: ModelFacts, tp: int, names: KeyNames, problems: Problems, key: str = "gpus_per_replica"
) -> None:
    """`tp` GPUs is a tensor-parallel size vLLM takes for the model (reported at `key`)."""
    if facts.attention_heads is None or tp in tensor_parallel_sizes(facts, tp):
        return
    kv = facts.kv_head_count
    what = "GPUs a node" if key == "gpus_per_replica" else "GPUs"
    problems.add(
        names.at(key),
        f"{tp} {what} is not a tensor-parallel size vLLM takes for {facts.name}: it splits the "
        f"{facts.attention_heads} attention heads ({kv} KV heads) evenly over them; sizes that work: "
        f"{listing(tensor_parallel_sizes(facts, max(tp, 8)))}",
    )


# The replica sizes a refusal suggests: one node's tensor-parallel sizes, then whole 8-GPU nodes (pipeline
# parallel across them), up to 64 GPUs (ModelServerSettings.gpus_per_replica's bound).
NODE_SIZES, NODE_GPUS, MOST_GPUS = (1, 2, 4, 8), 8, 64


class Replica(NamedTuple):
    """Where a replica runs, as far as the fit rules need it."""

    gpus: int
    """The replica's GPUs."""
    tensor_parallel: int | None
    """GPUs of one Pod (vLLM's tensor-parallel size); None where a Pod does not hold whole GPUs (MIG)."""
    accelerator: Accelerator | None
    """The GPU; None where it is not known here (then `unknown_gpu` says why)."""
    unknown_gpu: str = ""
    download_gib: int | None = None
    """The disk a Hugging Face model is downloaded to (None: not checked)."""
    download_fix: str = ""
    """How to grow that disk, for the message."""
    mig_partition: str | None = None
    """The MIG partition size a Pod runs on (`1g.10gb`), where `tensor_parallel` is None for it."""


def check_fit(
    settings: ModelServerSettings,
    replica: Replica,
    names: KeyNames,
    problems: Problems,
    notes: list[str] | None = None,
) -> ModelFacts | None:
    """What knowing the model decides on this replica; returns the model's facts, where known."""
    facts = check_model(
        settings,
        replica.tensor_parallel,
        names,
        problems,
        notes,
        download_gib=replica.download_gib,
        download_fix=replica.download_fix,
    )
    if facts is None:
        return None
    if replica.accelerator is not None and replica.tensor_parallel is not None:
        check_gpu_memory(
            settings, facts, replica, replica.accelerator, replica.tensor_parallel, names, problems
        )
    note_unchecked(facts, settings, replica, names, notes)
    return facts


def note_unchecked(
    facts: ModelFacts,
    settings: ModelServerSettings,
    replica: Replica,
    names: KeyNames,
    notes: list[str] | None,
) -> None:
    """The note that says which checks a missing figure kept from running, and the keys that would let
    them run."""
    if replica.tensor_parallel is None and notes is not None:
        # A MIG partition is a slice of a GPU's memory, which this check does not count: no model_info
        # figure would let it run, so the note says what will show it instead.
        partition = f" ({replica.mig_partition})" if replica.mig_partition else ""
        notes.append(
            f"note: {names.at('model')}: not checked against the GPUs' memory: the replicas run on MIG "
            f"partitions{partition}, slices of a GPU whose memory this check does not count, whatever the "
            "model's figures; only the server's start will show whether the model fits"
        )
    unchecked = _unchecked(facts, settings, replica, names)
    if unchecked and notes is not None:
        info = names.key("model_info")
        how = (
            f"state the figures of its config.json in {info} (instead of a catalogue entry)"
            if facts.source != "model_info"
            else f"state them in {info}"
        )
        whose = (
            f"{facts.name}, whose catalogue entry lacks the figures"
            if facts.source != "model_info"
            else "the model"
        )
        notes.append(
            f"note: {names.at('model_info')}: not checked for {whose}: {'; '.join(unchecked)}; to check "
            f"them, {how}"
        )


def _unchecked(
    facts: ModelFacts, settings: ModelServerSettings, replica: Replica, names: KeyNames
) -> list[str]:
    """The checks a missing figure keeps from running, each with the model_info keys that would let it
    run (none for the GPU, which the pool or the args decide)."""

    def keys(*fields: str) -> str:
        return ", ".join(names.key(f"model_info.{f}") for f in fields)

    found: list[str] = []
    # On a MIG partition the GPUs' memory is not checked whatever the figures (check_fit's own note):
    # only what a figure would let run is listed.
    whole = replica.tensor_parallel is not None
    if whole and replica.accelerator is None:
        found.append(f"the GPUs' memory: {replica.unknown_gpu}")
    if facts.parameters is None and facts.stated_weights_bytes is None:
        uses = "the GPUs' memory and the download disk" if whole else "the download disk"
        found.append(f"the weights' size, for {uses} ({keys('parameters', 'dtype')})")
    elif facts.weights_bytes is None:
        found.append(
            f"the weights' exact size: they are counted at {LEAST_WEIGHT_BYTES * 8:g} bits a weight, the "
            f"fewest any dtype takes ({keys('dtype')})"
        )
    context = settings.max_model_len or facts.max_context
    missing = missing_kv_figures(facts)
    if whole and (missing or context is None):
        fields = [*missing, *([] if context is not None else ["max_context"])]
        also = f", or {names.key('max_model_len')}" if context is None else ""
        found.append(f"the KV cache of one sequence, for the GPUs' memory ({keys(*fields)}{also})")
    if facts.attention_heads is None and replica.tensor_parallel is not None:
        found.append(f"the tensor-parallel size ({keys('attention_heads', 'kv_heads')})")
    if facts.max_context is None and settings.max_model_len is not None:
        found.append(f"{names.key('max_model_len')} against the model's context ({keys('max_context')})")
    return found


def replica_need(
    facts: ModelFacts, max_model_len: int | None, tensor_parallel: int, accelerator: Accelerator
) -> tuple[int, int] | None:
    """(weights, KV cache of one sequence) in bytes on `tensor_parallel` GPUs a stage, at the least; the
    KV cache 0 where it is not known; None where the weights are not known either."""
    weights = facts.least_weights_bytes
    if weights is None:
        return None
    context = max_model_len or facts.max_context
    in_flight = tokens_in_flight(accelerator.gpu_memory_bytes, accelerator.name)
    kv = kv_cache_bytes(facts, context, tensor_parallel, in_flight) if context is not None else None
    return weights, kv or 0


def fits(
    facts: ModelFacts,
    max_model_len: int | None,
    utilization: float,
    gpus: int,
    tensor_parallel: int,
    accelerator: Accelerator,
) -> bool:
    """Whether the weights and one sequence's KV cache fit `gpus` GPUs at `utilization` (True where the
    weights are not known)."""
    need = replica_need(facts, max_model_len, tensor_parallel, accelerator)
    return need is None or sum(need) <= int(gpus * accelerator.gpu_memory_bytes * utilization)


def check_gpu_memory(
    settings: ModelServerSettings,
    facts: ModelFacts,
    replica: Replica,
    accelerator: Accelerator,
    tensor_parallel: int,
    names: KeyNames,
    problems: Problems,
) -> None:
    """The weights and the KV cache of one sequence fit what vLLM may use of the replica's GPUs (its
    `requested_memory`: the device's total memory as CUDA reports it times --gpu-memory-utilization).
    Activations and CUDA graphs are not counted: what this refuses cannot start, what it accepts may
    still need a shorter context."""
    utilization = settings.gpu_memory_utilization or GPU_MEMORY_UTILIZATION
    need = replica_need(facts, settings.max_model_len, tensor_parallel, accelerator)
    if need is None:
        return
    weights, kv = need
    usable = int(replica.gpus * accelerator.gpu_memory_bytes * utilization)
    if weights + kv <= usable:
        return
    length = settings.max_model_len
    sizes = [
        n for n in NODE_SIZES if facts.attention_heads is None or n in tensor_parallel_sizes(facts, NODE_GPUS)
    ]
    sizes += list(range(2 * NODE_GPUS, MOST_GPUS + 1, NODE_GPUS))
    count = next(
        (n for n in sizes if fits(facts, length, utilization, n, min(n, NODE_GPUS), accelerator)), None
    )
    bigger = [
        a.name
        for a in load_catalog().accelerators.values()
        if a.gpu_memory_bytes > accelerator.gpu_memory_bytes
        and fits(facts, length, utilization, replica.gpus, tensor_parallel, a)
    ]
    context = length or facts.max_context
    exact = facts.weights_bytes is not None
    weights_text = (
        f"weights {gib(weights)}" if exact else f"weights at least {gib(weights)} (at 4 bits a weight)"
    )
    kv_text = f" + the KV cache of one {context}-token sequence {gib(kv)}" if kv else ""
    more = f"{count} {accelerator.name} GPUs" if count else f"more {accelerator.name} GPUs than {MOST_GPUS}"
    other = f", or {replica.gpus} GPU(s) of {listing(bigger)}" if bigger else ""
    shorter = f", or a shorter {names.key('max_model_len')}" if kv else ""
    problems.add(
        names.at("gpus_per_replica"),
        f"{replica.gpus} {accelerator.name} GPU(s) ({accelerator.gpu_memory_basis}; {utilization:g} of it "
        f"for vLLM: {gib(usable)}) cannot hold {facts.name}: {weights_text}{kv_text}; use "
        f"{more}{other}{shorter}",
    )


__all__ = [
    "GIB",
    "GPU_MEMORY_UTILIZATION",
    "Replica",
    "check_fit",
    "check_model",
    "fits",
    "tensor_parallel_sizes",
]
