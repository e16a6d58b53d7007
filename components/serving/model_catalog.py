"""What the serving rules know of a model: its size, dtypes, heads, KV cache layout, experts and context,
from the package's catalogue (components/data/models.yaml: figures from each model's config.json, card or
maker's code) or from the entry's own `model_info`. A figure that is not known is None: the checks it
alone decides are skipped, and the render says which keys would let them run (serving/fit.py).

Every figure is a lower bound of what vLLM needs (a card's rounded figure is recorded as the least value
it rounds from), so that a refusal built on them is always right."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ..core.data import DATA_DIR, load_data
from .model import ModelInfo, ModelServerSettings

# Bytes vLLM holds a weight in, by the dtype the catalogue and `model_info.dtype` name. vLLM's --dtype
# auto keeps a 16-bit checkpoint's dtype and casts a float32 one down to 16 bits (vllm 0.33.0
# config/model.py `_resolve_auto_dtype`: "Downcast for float32 models"); MXFP4 is 4-bit values and one
# 8-bit scale a block of 32 (openai/gpt-oss README, "Precision format").
DTYPE_BYTES = {
    "float32": 2.0,
    "bfloat16": 2.0,
    "float16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "mxfp4": 4.25 / 8,
    "int4": 0.5,
}
UNQUANTIZED = frozenset({"float32", "bfloat16", "float16"})
# The fewest bytes a weight takes in any dtype `model_info` may state: the lower bound of a model whose
# dtype is not known.
LEAST_WEIGHT_BYTES = min(DTYPE_BYTES.values())
# The KV cache's bytes an element: vLLM's --kv-cache-dtype auto is the model's dtype, a 16-bit float
# under --dtype auto (above), unless the checkpoint's quantization_config names a KV cache scheme
# (vllm 0.33.0 utils/torch_utils.py `resolve_kv_cache_dtype_string`), fp8 at the least. So 2 for an
# unquantized model, and at least 1 for a quantized one or one whose dtype is not known.
KV_BYTES_UNQUANTIZED, KV_BYTES_LEAST = 2, 1

AttentionType = Literal["full", "sliding", "chunked", "mla"]


class Attention(NamedTuple):
    """The layout of a model's KV cache (serving/kv_cache.py)."""

    type: AttentionType = "full"
    window: int | None = None
    """sliding: the tokens a sliding layer keeps; chunked: the chunk."""
    full_every: int | None = None
    """sliding: every `full_every`-th layer keeps every token (2: alternating; 6: five sliding, one full);
    None: every layer slides."""
    kv_lora_rank: int | None = None
    """mla: the latent's width."""
    rope_head_dim: int | None = None
    """mla: the rotary part of a key, cached beside the latent."""


@dataclass(frozen=True)
class ModelFacts:
    """One model as the rules see it; None where a figure is not known."""

    name: str
    parameters: int | None = None
    dtype: str | None = None
    attention_heads: int | None = None
    kv_heads: int | None = None
    layers: int | None = None
    head_dim: int | None = None
    max_context: int | None = None
    gated: bool | None = None
    source: str = ""
    active_parameters: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    shared_experts: int | None = None
    stated_weights_bytes: int | None = None
    kv_dtype: str | None = None
    attention: Attention = field(default_factory=Attention)
    expert_parameters: int | None = None
    """MoE: the routed experts' parameters over every layer (held in `dtype`), the part expert parallel
    spreads over its ranks; the rest is on every rank."""
    moe: bool | None = None
    """Whether the model is a mixture of experts: True with experts, False where the source shows a
    dense model, None where it is not known (a catalogue entry whose experts are unverified, model_info
    that states none)."""

    @property
    def expert_bytes(self) -> int | None:
        """The routed experts' weights in bytes, where their parameters and dtype are known."""
        if self.expert_parameters is None or self.dtype is None:
            return None
        return int(self.expert_parameters * DTYPE_BYTES[self.dtype])

    @property
    def weights_bytes(self) -> int | None:
        """The weights' size in bytes (parameters times the dtype's bytes, or the size the catalogue
        states for a checkpoint mixing dtypes); None where the dtype is not known."""
        if self.stated_weights_bytes is not None:
            return self.stated_weights_bytes
        if self.parameters is None or self.dtype is None:
            return None
        return int(self.parameters * DTYPE_BYTES[self.dtype])

    @property
    def least_weights_bytes(self) -> int | None:
        """What the weights take at the least: their size, or with the dtype not known the parameters at
        the fewest bytes any dtype gives (4 bits): parameters alone decide whether the weights fit."""
        if self.weights_bytes is not None:
            return self.weights_bytes
        return None if self.parameters is None else int(self.parameters * LEAST_WEIGHT_BYTES)

    @property
    def kv_element_bytes(self) -> int:
        """Bytes a KV cache element takes at the least (KV_BYTES_UNQUANTIZED, above)."""
        if self.kv_dtype is not None:
            return int(DTYPE_BYTES[self.kv_dtype])
        return KV_BYTES_UNQUANTIZED if self.dtype in UNQUANTIZED else KV_BYTES_LEAST

    @property
    def kv_head_count(self) -> int | None:
        """KV heads (a model without grouped-query attention has as many as attention heads)."""
        return self.kv_heads if self.kv_heads is not None else self.attention_heads


_FIELDS = {
    "parameters": "parameters",
    "dtype": "dtype",
    "attentionHeads": "attention_heads",
    "kvHeads": "kv_heads",
    "layers": "layers",
    "headDim": "head_dim",
    "maxContext": "max_context",
    "gated": "gated",
    "activeParameters": "active_parameters",
    "experts": "experts",
    "expertsPerToken": "experts_per_token",
    "sharedExperts": "shared_experts",
    "weightsBytes": "stated_weights_bytes",
    "kvDtype": "kv_dtype",
    "expertParameters": "expert_parameters",
}
_ATTENTION_FIELDS = {
    "type": "type",
    "window": "window",
    "fullEvery": "full_every",
    "kvLoraRank": "kv_lora_rank",
    "ropeHeadDim": "rope_head_dim",
}


def _facts(name: str, entry: dict[str, Any]) -> ModelFacts:
    unverified = set(entry.get("unverified", ()))
    known = {attr: entry.get(key) for key, attr in _FIELDS.items() if key not in unverified}
    layout = entry.get("attention", {})
    attention = Attention(**{attr: layout[key] for key, attr in _ATTENTION_FIELDS.items() if key in layout})
    # The KV heads of a model without grouped-query attention default to its attention heads only where
    # model_info states them (declared()); the catalogue names both, or neither is known.
    # Dense where the source shows no experts; not known where the experts are unverified.
    moe = True if known.get("experts") is not None else (None if "experts" in unverified else False)
    return ModelFacts(name=name, source=entry["source"], attention=attention, moe=moe, **known)


@functools.cache
def catalogue() -> dict[str, ModelFacts]:
    """The catalogue by lowercase Hugging Face id (Hugging Face resolves ids case-insensitively)."""
    entries = load_data(DATA_DIR / "models.yaml")["models"]
    return {name.lower(): _facts(name, entry) for name, entry in entries.items()}


def catalogued(name: str) -> ModelFacts | None:
    """The catalogue's entry for a Hugging Face id, or None."""
    return catalogue().get(name.lower())


def declared(info: ModelInfo) -> ModelFacts | None:
    """The figures `model_info` states: a catalogue entry it names, or its own figures (kvHeads defaults to
    attentionHeads: a model without grouped-query attention). None where it names no known entry."""
    if info.catalog is not None:
        return catalogued(info.catalog)
    return ModelFacts(
        name="model_info",
        parameters=info.parameters,
        dtype=info.dtype,
        attention_heads=info.attention_heads,
        kv_heads=info.kv_heads if info.kv_heads is not None else info.attention_heads,
        layers=info.layers,
        head_dim=info.head_dim,
        max_context=info.max_context,
        gated=info.gated,
        experts=info.experts,
        expert_parameters=info.expert_parameters,
        moe=True if info.experts is not None else None,
        source="model_info",
    )


def model_facts(settings: ModelServerSettings) -> ModelFacts | None:
    """What is known of a service's model: its `model_info`, else the catalogue's entry for its Hugging
    Face id; None for a model known to neither (a gs:// path is never matched by its name)."""
    if settings.model_info is not None:
        return declared(settings.model_info)
    return catalogued(settings.model)


def weights_bytes(settings: ModelServerSettings) -> int | None:
    """The model's weights in bytes, where known (for the file cache's and the disk's sizes)."""
    facts = model_facts(settings)
    return facts.weights_bytes if facts else None
