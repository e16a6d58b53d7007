"""The KV cache one sequence takes, as vLLM counts it at start, by the model's attention layout.

vLLM stops at start when its KV cache cannot hold one request of --max-model-len: it sums, over the
layers, each layer's KV cache spec's `max_memory_usage_bytes` and compares the sum with the memory left
after the weights ("To serve at least one request with the model's max seq len ..."). Sources, all in
vLLM 0.33.0 (vllm-project/vllm@4ba787ec9, the wheel vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl,
sha256 4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa), the version the pinned image
runs (core/images.py):

- v1/core/kv_cache_planning.py `check_enough_kv_cache_memory`, `max_memory_usage_bytes`: the sum over
  the layers' specs, against the memory left.
- v1/kv_cache_interface.py `AttentionSpec.state_content_size_bytes`: a token of a layer takes
  num_kv_heads x (head_size + head_size_v) x the cache dtype's bytes, keys and values (head_size_v is
  head_size).
- `FullAttentionSpec.max_memory_usage_bytes`: every token of max_model_len.
- `SlidingWindowSpec.max_admission_blocks_per_request`: min(window - 1 + the tokens in flight,
  max_model_len) tokens, plus a block: vLLM's hybrid KV cache manager keeps a sliding layer's window
  only. It is on by default on GPUs (config/vllm.py), and off for a model with chunked local attention
  (Llama 4) unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is set, so such a model keeps
  every token in every layer (the layer is a FullAttentionSpec then).
- model_executor/layers/attention/mla_attention.py `get_kv_cache_spec`: MLA caches one latent a token,
  num_kv_heads 1, head_size kv_lora_rank + qk_rope_head_dim, no separate value (head_size_v 0), on every
  tensor-parallel rank (max_tp_shards 1).
- A layer's KV heads are split over the tensor-parallel ranks and replicated where there are fewer heads
  than ranks (QKVParallelLinear: a rank holds max(1, kv_heads / tp)); pipeline parallel puts each layer
  on one stage. So a replica holds each layer's cache once per max(kv_heads, tp) heads.
- engine/arg_utils.py `get_batch_defaults`: the OpenAI server's max_num_batched_tokens, the tokens in
  flight a sliding layer keeps beside its window: 2048 on a GPU under 70 GiB (or an A100), 8192 from 70
  GiB, 16384 from 160 GiB; one batch in flight at the least (config/vllm.py `max_in_flight_tokens`).

What is counted is a lower bound: blocks are not rounded up, the extra block a sliding layer keeps and
the async scheduler's second batch are not counted, so a model this refuses cannot start, and one it
accepts may still need a shorter context."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model_catalog import ModelFacts

GIB = 1024**3
# vLLM's OpenAI-server max_num_batched_tokens by the device's memory (above).
SMALL_GPU_BATCH, LARGE_GPU_BATCH, LARGEST_GPU_BATCH = 2048, 8192, 16384
LARGE_GPU_BYTES, LARGEST_GPU_BYTES = 70 * GIB, 160 * GIB


def tokens_in_flight(gpu_bytes: int, accelerator: str) -> int:
    """The tokens vLLM's server schedules in one batch by default on this GPU (get_batch_defaults)."""
    if gpu_bytes >= LARGEST_GPU_BYTES:
        return LARGEST_GPU_BATCH
    if gpu_bytes >= LARGE_GPU_BYTES and "a100" not in accelerator:
        return LARGE_GPU_BATCH
    return SMALL_GPU_BATCH


def missing_kv_figures(facts: ModelFacts) -> list[str]:
    """The figures the KV cache's size needs that are not known (model_info's field names)."""
    if facts.attention.type == "mla":
        return [] if facts.layers is not None else ["layers"]
    needed = {"layers": facts.layers, "head_dim": facts.head_dim, "attention_heads": facts.kv_head_count}
    return [name for name, value in needed.items() if value is None]


def layer_tokens(facts: ModelFacts, max_model_len: int, in_flight: int) -> list[int]:
    """The tokens each layer keeps for one sequence of `max_model_len` (vLLM's specs, above)."""
    layers = facts.layers or 0
    attention = facts.attention
    if attention.type != "sliding" or attention.window is None:
        return [max_model_len] * layers  # full, chunked (no hybrid manager) and MLA layers keep every token
    window = min(attention.window - 1 + in_flight, max_model_len)
    every = attention.full_every
    # Layer i keeps every token when (i + 1) is a multiple of full_every (Gemma 3: five sliding, one full;
    # Gemma 2 and gpt-oss: alternating, the first sliding).
    return [max_model_len if every and (i + 1) % every == 0 else window for i in range(layers)]


def bytes_per_layer_token(facts: ModelFacts, tensor_parallel: int) -> int | None:
    """What one token of one layer takes over a replica's tensor-parallel ranks; None where a figure is
    missing."""
    element = facts.kv_element_bytes
    attention = facts.attention
    if attention.type == "mla":
        if attention.kv_lora_rank is None or attention.rope_head_dim is None:
            return None
        return tensor_parallel * (attention.kv_lora_rank + attention.rope_head_dim) * element
    heads, head_dim = facts.kv_head_count, facts.head_dim
    if heads is None or head_dim is None:
        return None
    return max(heads, tensor_parallel) * 2 * head_dim * element


def kv_cache_bytes(facts: ModelFacts, max_model_len: int, tensor_parallel: int, in_flight: int) -> int | None:
    """The KV cache of one sequence of `max_model_len` over a replica's GPUs (`tensor_parallel` GPUs a
    stage; a pipeline's stages split the layers), as vLLM sizes it at start; None where a figure it
    needs is not known (missing_kv_figures)."""
    per_token = bytes_per_layer_token(facts, tensor_parallel)
    if per_token is None or facts.layers is None:
        return None
    return per_token * sum(layer_tokens(facts, max_model_len, in_flight))


__all__ = ["kv_cache_bytes", "missing_kv_figures", "tokens_in_flight"]
