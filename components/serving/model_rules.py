"""The rules that follow from knowing the model (serving/model_catalog.py), for the stack file's `serving`
entries and InferenceService's args alike: the token a gated model needs, a tensor-parallel size vLLM
accepts, a context within the model's, weights that fit the disk they are downloaded to and the GPUs that
hold them. A figure that is not known skips the check it feeds (a note says so), never a guess."""

from __future__ import annotations

from ..core.common import KeyNames, Problems, cut, listing
from .model import ModelServerSettings
from .model_catalog import DTYPE_BYTES, ModelFacts, catalogue, model_facts
from .rules import weights_source

# vLLM's default --gpu-memory-utilization (vllm/config/cache.py, CacheConfig.gpu_memory_utilization).
GPU_MEMORY_UTILIZATION = 0.92
GIB = 1024**3


def download_disk_gib(ephemeral_gib: int) -> int:
    """The disk a replica may write on its node (a Hugging Face model's download, caches): a quarter of
    the node's ephemeral storage (GpuPool.node_ephemeral_storage_gib: its Local SSDs where the pool puts
    ephemeral storage on them, else its boot disk), at least 20 GiB (the image and the node need the
    rest)."""
    return max(20, ephemeral_gib // 4)


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
                f"{names.key('model_info')}: its size, heads and context are not checked"
            )
        return None
    _check_token(settings, facts, names, problems, notes, huggingface=huggingface)
    if tensor_parallel is not None:
        _check_tensor_parallel(facts, tensor_parallel, names, problems)
    context = facts.max_context
    if settings.max_model_len is not None and context is not None and settings.max_model_len > context:
        problems.add(
            names.at("max_model_len"),
            f"{settings.max_model_len} is more than {facts.name}'s context, {context} tokens (config.json's "
            f"max_position_embeddings), which vLLM refuses to exceed; use at most {context}",
        )
    weights = facts.weights_bytes
    if download_gib is not None and huggingface and weights is not None and weights > download_gib * GIB:
        problems.add(
            names.at("model"),
            f"{facts.name}'s weights, {gib(weights)}, do not fit the {download_gib} GiB the server downloads "
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
    heads, kv = facts.attention_heads, facts.kv_heads or facts.attention_heads
    assert heads is not None and kv is not None
    return [
        tp for tp in range(1, most + 1) if heads % tp == 0 and (kv % tp == 0 if tp < kv else tp % kv == 0)
    ]


def _check_tensor_parallel(facts: ModelFacts, tp: int, names: KeyNames, problems: Problems) -> None:
    if facts.attention_heads is None or tp in tensor_parallel_sizes(facts, tp):
        return
    kv = facts.kv_heads or facts.attention_heads
    problems.add(
        names.at("gpus_per_replica"),
        f"{tp} GPUs a node is not a tensor-parallel size vLLM takes for {facts.name}: it splits the "
        f"{facts.attention_heads} attention heads ({kv} KV heads) evenly over them; sizes that work: "
        f"{listing(tensor_parallel_sizes(facts, max(tp, 8)))}",
    )


def fits_gpus(
    facts: ModelFacts, max_model_len: int | None, utilization: float, gpus: int, gpu_bytes: int
) -> tuple[int, int, int] | None:
    """(weights, KV cache of one sequence at the context, what vLLM may use) in bytes, when the first two
    exceed the third: vLLM stops at start (no memory left for the KV cache, or a KV cache that cannot hold
    one sequence of max_model_len). None when they fit or the weights are not known. What vLLM may use is
    its own `requested_memory`: the device's total memory as CUDA reports it (`gpu_bytes`, per GPU) times
    --gpu-memory-utilization. Activations and CUDA graphs are not counted: what this refuses cannot work,
    what it accepts may still not."""
    weights = facts.weights_bytes
    if weights is None:
        return None
    context = max_model_len or facts.max_context
    per_token = facts.kv_bytes_per_token
    kv = per_token * context if per_token is not None and context is not None else 0
    usable = int(gpus * gpu_bytes * utilization)
    return (weights, kv, usable) if weights + kv > usable else None


def smallest_gpu_count(need: int, gpu_bytes: int, utilization: float, counts: list[int]) -> int | None:
    """The fewest GPUs, among `counts`, whose usable memory holds `need` bytes."""
    return next((n for n in sorted(counts) if n * gpu_bytes * utilization >= need), None)


__all__ = ["DTYPE_BYTES", "GPU_MEMORY_UTILIZATION", "check_model", "fits_gpus", "tensor_parallel_sizes"]
