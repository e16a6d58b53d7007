"""What the serving rules know of a model: its size, dtype, attention heads and context, from the package's
catalogue (components/data/models.yaml: figures from each model's config.json or card) or from the entry's
own `model_info`. A figure that is not known is None, and the check it feeds is skipped with a note."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..core.data import DATA_DIR, load_yaml
from .model import ModelInfo, ModelServerSettings

# Bytes a weight takes in each dtype the catalogue and `model_info.dtype` name.
DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
_FIELDS = ("parameters", "dtype", "attentionHeads", "kvHeads", "layers", "headDim", "maxContext", "gated")


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

    @property
    def weights_bytes(self) -> int | None:
        """The weights' size in bytes: parameters times the dtype's bytes."""
        if self.parameters is None or self.dtype is None:
            return None
        return int(self.parameters * DTYPE_BYTES[self.dtype])

    @property
    def kv_bytes_per_token(self) -> int | None:
        """The KV cache one token takes over all layers (keys and values, in the weights' dtype: vLLM's
        --kv-cache-dtype auto)."""
        if None in (self.layers, self.kv_heads, self.head_dim, self.dtype):
            return None
        assert self.layers and self.kv_heads and self.head_dim and self.dtype
        return int(2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES[self.dtype])


@functools.cache
def catalogue() -> dict[str, ModelFacts]:
    """The catalogue by lowercase Hugging Face id (Hugging Face resolves ids case-insensitively)."""
    entries = load_yaml(DATA_DIR / "models.yaml")["models"]
    found = {}
    for name, entry in entries.items():
        unverified = set(entry.get("unverified", ()))
        known = {f: (None if f in unverified else entry.get(f)) for f in _FIELDS}
        found[name.lower()] = ModelFacts(
            name=name,
            parameters=known["parameters"],
            dtype=known["dtype"],
            attention_heads=known["attentionHeads"],
            kv_heads=known["kvHeads"],
            layers=known["layers"],
            head_dim=known["headDim"],
            max_context=known["maxContext"],
            gated=known["gated"],
            source=entry["source"],
        )
    return found


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
