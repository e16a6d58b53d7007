"""The fit rules fuzzed (issue 35): every catalogued model, and models stated in part, on GPUs of every
size, at any context and memory share. Whatever is drawn, the stack rules refuse it with a ConfigError or
accept it (no other exception, no hang), InferenceService declared alone agrees, and a refusal for the
GPUs' memory is never made of a model that fits by vLLM's arithmetic, recomputed here layer by layer
(reference_need: the lower bound the catalogue's figures give)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gke_gpu.core.catalog import load_catalog
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.serving.model import ModelServerSettings
from gke_gpu.serving.model_catalog import ModelFacts, catalogue, model_facts
from gke_gpu.stack.config import ConfigError, parse_settings
from tests.test_fuzz import fuzz, no_hang

CATALOGUED = sorted(m.name for m in catalogue().values())
# (accelerator, GPUs a node) with a machine the catalog sells that way.
GPUS = [
    ("nvidia-l4", 1),
    ("nvidia-l4", 8),
    ("nvidia-tesla-a100", 8),
    ("nvidia-a100-80gb", 8),
    ("nvidia-h100-80gb", 8),
    ("nvidia-h200-141gb", 8),
    ("nvidia-b200", 8),
]
STATED = st.fixed_dictionaries(
    {},
    optional={
        "parameters": st.integers(1_000_000, 2_000_000_000_000),
        "dtype": st.sampled_from(["bfloat16", "float16", "float32", "fp8", "int8", "mxfp4", "int4"]),
        "attentionHeads": st.sampled_from([8, 16, 32, 64, 128]),
        "layers": st.integers(1, 200),
        "headDim": st.sampled_from([64, 128, 256]),
        "maxContext": st.sampled_from([4096, 32768, 131072, 1_048_576]),
    },
)


def reference_need(model: ModelFacts, length: int | None, tp: int, in_flight: int) -> int:
    """Weights (at the least) plus one sequence's KV cache, layer by layer, as vLLM sizes them."""
    if model.weights_bytes is not None:
        weights = model.weights_bytes
    else:
        weights = int(model.parameters * 0.5) if model.parameters else 0
    length = length or model.max_context
    layout = model.attention
    kv = 0
    if length and model.layers:
        for layer in range(model.layers):
            if layout.type == "mla":
                if layout.kv_lora_rank is None or layout.rope_head_dim is None:
                    return weights
                per_token = tp * (layout.kv_lora_rank + layout.rope_head_dim) * model.kv_element_bytes
            else:
                heads = model.kv_heads or model.attention_heads
                if heads is None or model.head_dim is None:
                    return weights
                per_token = max(heads, tp) * 2 * model.head_dim * model.kv_element_bytes
            full = layout.type != "sliding" or (layout.full_every and (layer + 1) % layout.full_every == 0)
            tokens = length if full else min(layout.window - 1 + in_flight, length)  # type: ignore[operator]
            kv += per_token * tokens
    return weights + kv


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    accelerator, per_node = draw(st.sampled_from(GPUS))
    entry: dict[str, Any] = {"name": "chat", "pool": "gpus"}
    if draw(st.booleans()):
        entry["model"] = draw(st.sampled_from(CATALOGUED))
        entry["hfTokenSecret"] = "hf-token"
    else:
        entry["model"] = "gs://models-bucket/model"
        entry["modelInfo"] = draw(STATED) or {"parameters": 7_000_000_000}
    entry |= draw(
        st.fixed_dictionaries(
            {},
            optional={
                "gpusPerReplica": st.sampled_from([g for g in (1, 2, 4, 8) if g <= per_node]),
                "maxModelLen": st.sampled_from([2048, 32768, 131072, 1_000_000]),
                "gpuMemoryUtilization": st.sampled_from([0.5, 0.92, 1]),
            },
        )
    )
    pool = {
        "name": "gpus",
        "accelerator": accelerator,
        "gpusPerNode": per_node,
        "maxNodes": 2,
        "driverVersion": "LATEST",
        "diskSizeGb": 3000,
    }
    return {"cluster": {"mode": "standard", "name": "gpu-fuzz"}, "gpuPools": [pool], "serving": [entry]}


@given(cases())
@fuzz(examples=120, deadline_ms=5000)
def test_a_memory_refusal_is_always_right_and_the_component_agrees(raw: dict[str, Any]) -> None:
    entry, pool = raw["serving"][0], raw["gpuPools"][0]
    with no_hang(10):
        try:
            parse_settings(raw, project="p-123456", region="us-central1", stack="fuzz")
            refused = ""
        except ConfigError as error:
            refused = str(error)
        args = {
            "model": entry["model"],
            "node_selector": {"cloud.google.com/gke-accelerator": pool["accelerator"]},
            "tolerations": [],
            "project": "p-123456",
            "cluster_name": "gpu",
            "gpus_per_replica": entry.get("gpusPerReplica", 1),
            "disk_gib": 10_000,
        }
        for key, arg in (("hfTokenSecret", "hf_token_secret"), ("maxModelLen", "max_model_len")):
            if key in entry:
                args[arg] = entry[key]
        if "gpuMemoryUtilization" in entry:
            args["gpu_memory_utilization"] = entry["gpuMemoryUtilization"]
        if "modelInfo" in entry:
            args["model_info"] = {
                re.sub(r"([A-Z])", r"_\1", k).lower(): v for k, v in entry["modelInfo"].items()
            }
        try:
            InferenceService.check_args("chat", args)
            component = ""
        except InvalidArgsError as error:
            component = str(error)
    memory = "cannot hold" in refused
    event("refused for memory" if memory else "refused" if refused else "accepted")
    # The component refuses for memory exactly when the stack does (its disk is ample).
    assert memory == ("cannot hold" in component), (refused, component)
    if not memory:
        return
    stated = {k: v for k, v in entry.items() if k not in ("name", "pool")}
    settings = ModelServerSettings.model_validate(stated)
    model = model_facts(settings)
    assert model is not None
    gpus = entry.get("gpusPerReplica", 1)
    accelerator = load_catalog().accelerator(pool["accelerator"])
    assert accelerator is not None
    from gke_gpu.serving.kv_cache import tokens_in_flight

    in_flight = tokens_in_flight(accelerator.gpu_memory_bytes, accelerator.name)
    need = reference_need(model, entry.get("maxModelLen"), gpus, in_flight)
    usable = int(gpus * accelerator.gpu_memory_bytes * entry.get("gpuMemoryUtilization", 0.92))
    assert need > usable, (model.name, need, usable)
