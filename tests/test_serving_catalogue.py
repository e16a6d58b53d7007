"""The model catalogue held to its sources, and vLLM's KV cache arithmetic per attention type (issue 35).

Each parameter count below is recomputed here from the shapes its source gives (the source is named at
each), so a figure mistyped into components/data/models.yaml fails. The KV cache figures are worked from
vLLM 0.33.0's own specs (serving/kv_cache.py names the files): a token of a layer takes its KV heads x
(head size + value head size) x the element's bytes; a sliding layer keeps min(window - 1 + the tokens in
flight, max_model_len) tokens; MLA caches one latent of kv_lora_rank + qk_rope_head_dim a token on every
tensor-parallel rank."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gke_gpu.serving.kv_cache import kv_cache_bytes, missing_kv_figures, tokens_in_flight
from gke_gpu.serving.model_catalog import DTYPE_BYTES, Attention, ModelFacts, catalogue, catalogued

GIB = 1024**3
CATALOGUE = Path(__file__).parent.parent / "components" / "data" / "models.yaml"


def facts(name: str) -> ModelFacts:
    found = catalogued(name)
    assert found is not None, name
    return found


def llama_parameters(dim: int, layers: int, heads: int, kv: int, ffn: int, vocab: int = 128256) -> int:
    """Meta's arch_args to a parameter count: untied embeddings and LM head, q/k/v/o, the gated MLP, two
    norms a layer and the final one."""
    head = dim // heads
    layer = dim * heads * head + 2 * dim * kv * head + heads * head * dim + 3 * dim * ffn + 2 * dim
    return 2 * vocab * dim + layers * layer + dim


def llama_ffn(dim: int, multiplier: float, multiple_of: int) -> int:
    """Meta's FFN width: 2/3 of 4 x dim, times ffn_dim_multiplier, rounded up to multiple_of."""
    hidden = int(multiplier * int(2 * 4 * dim / 3))
    return multiple_of * -(-hidden // multiple_of)


def gemma3_parameters(embed: int, mlp: int, heads: int, head_dim: int, kv: int, layers: int) -> int:
    """google-deepmind/gemma's TransformerConfig to the language model's parameters: tied embeddings of
    262144 tokens, q/k/v/o, the gated MLP, four norms and the q/k norms a layer, the final norm."""
    layer = (
        2 * embed * heads * head_dim + 2 * embed * kv * head_dim + 3 * embed * mlp + 4 * embed + 2 * head_dim
    )
    return 262144 * embed + layers * layer + embed


def test_the_meta_models_are_their_arch_args() -> None:
    # meta-llama/llama-models@8c88b8c0 models/sku_list.py: llama3_1_70b_instruct and llama3_3_70b_instruct
    # (dim 8192, 80 layers, 64/8 heads, ffn_dim_multiplier 1.3, multiple_of 4096); llama3_1_405b_instruct
    # bf16-mp8 (16384, 126, 128/8, 1.2, 4096).
    assert llama_ffn(8192, 1.3, 4096) == 28672 and llama_ffn(16384, 1.2, 4096) == 53248
    seventy = llama_parameters(8192, 80, 64, 8, 28672)
    assert facts("meta-llama/Llama-3.3-70B-Instruct").parameters == seventy
    assert facts("meta-llama/Llama-3.1-70B-Instruct").parameters == seventy
    big = facts("meta-llama/Llama-3.1-405B-Instruct")
    assert big.parameters == llama_parameters(16384, 126, 128, 8, 53248) == 405_853_388_800
    assert (big.attention_heads, big.kv_heads, big.layers, big.head_dim) == (128, 8, 126, 128)
    assert all(facts(m).gated for m in catalogue() if m.startswith("meta-llama/llama-3"))


def qwen2_parameters(hidden: int, layers: int, heads: int, kv: int, mlp: int, vocab: int = 151936) -> int:
    """A Qwen2 config.json to a parameter count: tied embeddings, q/k/v with biases, o, the gated MLP,
    two norms a layer and the final one (hidden / heads a head: no head_dim in a Qwen2 config)."""
    head = hidden // heads
    attention = (hidden + 1) * heads * head + 2 * (hidden + 1) * kv * head + hidden * hidden
    return vocab * hidden + layers * (attention + 3 * hidden * mlp + 2 * hidden) + hidden


def test_qwen_2_5_1_5b_is_its_config_json() -> None:
    # hubconfig: vllm-project/vllm-ascend#109 quotes the Qwen2Config transformers loaded from
    # Qwen/Qwen2.5-1.5B-Instruct/config.json (hidden 1536, 28 layers, 12/2 heads, MLP 8960, bfloat16).
    qwen = facts("Qwen/Qwen2.5-1.5B-Instruct")
    assert qwen.parameters == qwen2_parameters(1536, 28, 12, 2, 8960) == 1_543_714_304
    # The card's 1.31B without the embeddings.
    assert round((qwen.parameters - 151936 * 1536) / 1e9, 2) == 1.31
    assert (qwen.dtype, qwen.attention_heads, qwen.kv_heads, qwen.layers, qwen.head_dim) == (
        "bfloat16",
        12,
        2,
        28,
        128,
    )
    assert qwen.max_context == 32768 and qwen.gated is None  # the card copy has no front matter
    # The 3B holds to the same arithmetic (mlc qwen2.5_3b).
    assert facts("Qwen/Qwen2.5-3B-Instruct").parameters == qwen2_parameters(2048, 36, 16, 2, 11008)


def test_gemma_3_is_its_transformer_configs_and_slides() -> None:
    # google-deepmind/gemma@7691fd4e gemma/gm/nn/_gemma.py: Gemma3_4B, Gemma3_12B, Gemma3_27B.
    for name, shape in {
        "google/gemma-3-4b-it": (2560, 10240, 8, 256, 4, 34),
        "google/gemma-3-12b-it": (3840, 15360, 16, 256, 8, 48),
        "google/gemma-3-27b-it": (5376, 21504, 32, 128, 16, 62),
    }.items():
        model = facts(name)
        assert model.parameters == gemma3_parameters(*shape), name
        assert (model.attention_heads, model.head_dim, model.kv_heads, model.layers) == shape[2:], name
        # GEMMA3_ATTENTION_PATTERN: five sliding layers, then a global one; window 1024.
        assert model.attention == Attention(type="sliding", window=1024, full_every=6), name
    assert facts("google/gemma-3-1b-it").attention == Attention(type="sliding", window=512, full_every=6)
    for name in ("google/gemma-2-2b-it", "google/gemma-2-9b-it", "google/gemma-2-27b-it"):
        assert facts(name).attention == Attention(type="sliding", window=4096, full_every=2)
    # Every Gemma card's front matter gates it (extra_gated_heading: Access Gemma on Hugging Face).
    assert all(facts(m).gated is True for m in catalogue() if m.startswith("google/gemma"))


def test_gpt_oss_120b_is_its_model_config_with_mxfp4_experts() -> None:
    # openai/gpt-oss@7b583341 gpt_oss/torch/model.py ModelConfig: 36 layers, 128 experts (4 a token),
    # hidden and expert width 2880, 64 heads of 64, 8 KV heads, vocabulary 201088, unembedding untied.
    layers, experts, hidden, vocab, heads, kv, head = 36, 128, 2880, 201088, 64, 8, 64
    qkv = hidden * (heads + 2 * kv) * head + (heads + 2 * kv) * head
    attention = qkv + heads * head * hidden + hidden + heads + hidden  # out with bias, sinks, norm
    router = hidden * experts + experts
    expert_weights = experts * (2 * hidden * hidden + hidden * hidden)  # gate_up and down
    expert_biases = experts * (2 * hidden + hidden)
    sixteen_bit = layers * (attention + router + expert_biases + hidden) + 2 * vocab * hidden + hidden
    four_bit = layers * expert_weights
    model = facts("openai/gpt-oss-120b")
    assert model.parameters == sixteen_bit + four_bit == 116_829_156_672  # the README's "117B"
    # MXFP4 (README, "Precision format"): two 4-bit values a byte, one 8-bit scale a block of 32.
    assert model.weights_bytes == 2 * sixteen_bit + four_bit // 2 + four_bit // 32
    assert (model.experts, model.experts_per_token, model.layers, model.head_dim) == (128, 4, 36, 64)
    # Every other layer slides over 128 tokens (layer_idx % 2 == 0: the first slides).
    assert model.attention == Attention(type="sliding", window=128, full_every=2)
    assert model.kv_dtype == "bfloat16" and DTYPE_BYTES["mxfp4"] == 4.25 / 8


def test_deepseek_is_its_inference_config_and_readme() -> None:
    # deepseek-ai/DeepSeek-V3@9b4e9788 inference/configs/config_671B.json and README.md ("671B total,
    # 37B activated"; FP8 weights only): a card's rounded figure is its least value.
    for name in ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1"):
        model = facts(name)
        assert model.parameters == 670_500_000_000 and model.dtype == "fp8"
        assert (model.experts, model.experts_per_token, model.shared_experts) == (256, 8, 1)
        assert model.attention == Attention(type="mla", kv_lora_rank=512, rope_head_dim=64)
        assert (model.layers, model.attention_heads) == (61, 128)
        assert model.active_parameters is not None and model.active_parameters < model.parameters


def test_mixtral_runs_two_of_its_eight_experts_a_token() -> None:
    # mlc Mixtral-8x7B-v0.1: 32 layers, 8 experts of a gated MLP 4096 x 14336, 2 a token.
    model = facts("mistralai/Mixtral-8x7B-Instruct-v0.1")
    expert = 3 * 4096 * 14336
    shared = model.parameters - 32 * 8 * expert  # type: ignore[operator]
    assert model.active_parameters == shared + 32 * 2 * expert


def test_every_entry_is_sourced_and_states_or_disowns_each_figure() -> None:
    text = CATALOGUE.read_text()
    header = text.split("\nmodels:\n")[0]
    keys = set(re.findall(r"^#   (\w+)\s{2,}", header, re.M))
    fields = ("parameters", "dtype", "attentionHeads", "layers", "maxContext", "gated")
    import yaml

    for name, entry in yaml.safe_load(text)["models"].items():
        cited = {word for word in re.findall(r"[a-z]+", entry["source"]) if word in keys}
        assert cited, f"{name} cites no source of the table: {entry['source']}"
        for field in fields:
            assert (field in entry) != (field in entry.get("unverified", ())), (name, field)
        model = facts(name)
        if model.experts is not None:
            assert model.active_parameters is not None and model.parameters is not None, name
            assert model.active_parameters < model.parameters, name
        if model.attention.type == "sliding":
            assert model.attention.window and model.attention.full_every, name
    moe = [m for m in catalogue().values() if m.experts]
    assert {m.name for m in moe} >= {
        "deepseek-ai/DeepSeek-V3",
        "openai/gpt-oss-120b",
        "Qwen/Qwen3-235B-A22B",
        "Qwen/Qwen3-30B-A3B",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
    }


# vLLM's KV cache arithmetic, per attention type.

LLAMA_8B = facts("meta-llama/Llama-3.1-8B-Instruct")


def test_full_attention_keeps_every_token_in_every_layer() -> None:
    # 32 layers x 8 KV heads x (128 + 128) x 2 bytes = 128 KiB a token.
    assert kv_cache_bytes(LLAMA_8B, 1000, 1, 2048) == 1000 * 32 * 8 * 256 * 2 == 1000 * 128 * 1024
    # Two GPUs split the 8 KV heads: the same cache over the replica.
    assert kv_cache_bytes(LLAMA_8B, 1000, 2, 2048) == kv_cache_bytes(LLAMA_8B, 1000, 1, 2048)
    # Sixteen GPUs (two 8-GPU stages would split the layers; here one stage of 16 ranks): each rank
    # holds one head, eight of them copies.
    assert kv_cache_bytes(LLAMA_8B, 1000, 16, 2048) == 2 * kv_cache_bytes(LLAMA_8B, 1000, 1, 2048)


def test_sliding_layers_keep_their_window_and_the_tokens_in_flight() -> None:
    gemma = facts("google/gemma-3-27b-it")
    per_layer_token = 16 * (128 + 128) * 2  # 16 KV heads of 128, keys and values, bfloat16
    length, in_flight = 131072, 8192
    window = 1024 - 1 + in_flight
    expected = per_layer_token * (10 * length + 52 * window)  # 62 layers: every 6th full
    assert kv_cache_bytes(gemma, length, 1, in_flight) == expected
    # Counting every layer at full context would ask 4.5 times as much.
    assert per_layer_token * 62 * length > 4.5 * expected
    # Below the window a sliding layer keeps the whole sequence, as a full one does.
    assert kv_cache_bytes(gemma, 512, 1, 0) == per_layer_token * 62 * 512


def test_chunked_local_attention_keeps_every_token_under_vllm_033() -> None:
    # Llama 4's chunked layers: vLLM 0.33 turns its hybrid KV cache manager off for them, so each
    # layer is a FullAttentionSpec. The catalogue does not know Llama 4's shapes: a stated model does.
    stated = ModelFacts(name="x", layers=48, kv_heads=8, attention_heads=40, head_dim=128, dtype="bfloat16")
    chunked = ModelFacts(**{**stated.__dict__, "attention": Attention(type="chunked", window=8192)})
    assert kv_cache_bytes(chunked, 65536, 1, 2048) == kv_cache_bytes(stated, 65536, 1, 2048)
    assert missing_kv_figures(facts("meta-llama/Llama-4-Scout-17B-16E-Instruct")) == [
        "layers",
        "head_dim",
        "attention_heads",
    ]


def test_mla_caches_one_latent_a_token_on_every_rank() -> None:
    deepseek = facts("deepseek-ai/DeepSeek-V3")
    # (512 + 64) x 2 bytes (bfloat16: the FP8 checkpoint names no KV cache scheme) x 61 layers, per rank.
    per_rank = 576 * 2 * 61
    assert kv_cache_bytes(deepseek, 1000, 1, 2048) == 1000 * per_rank
    assert kv_cache_bytes(deepseek, 1000, 8, 2048) == 8 * 1000 * per_rank
    assert missing_kv_figures(deepseek) == []


def test_the_kv_element_is_two_bytes_unless_the_checkpoint_may_quantize_it() -> None:
    assert LLAMA_8B.kv_element_bytes == 2
    # vLLM serves a float32 checkpoint in 16 bits, weights and KV cache alike.
    wide = ModelFacts(name="x", parameters=1_000_000_000, dtype="float32")
    assert wide.weights_bytes == 2_000_000_000 and wide.kv_element_bytes == 2
    # A quantized checkpoint may name an fp8 KV cache scheme; one whose dtype is not known may be one.
    assert ModelFacts(name="x", dtype="fp8").kv_element_bytes == 1
    assert ModelFacts(name="x").kv_element_bytes == 1


@pytest.mark.parametrize(
    ("gib", "accelerator", "tokens"),
    [
        (22, "nvidia-l4", 2048),
        (40, "nvidia-tesla-a100", 2048),
        (79, "nvidia-a100-80gb", 2048),
        (79, "nvidia-h100-80gb", 8192),
        (139, "nvidia-h200-141gb", 8192),
        (178, "nvidia-b200", 16384),
    ],
)
def test_the_tokens_in_flight_are_the_servers_batch_for_the_gpu(
    gib: int, accelerator: str, tokens: int
) -> None:
    # engine/arg_utils.py get_batch_defaults, the OpenAI server's column.
    assert tokens_in_flight(gib * GIB, accelerator) == tokens
