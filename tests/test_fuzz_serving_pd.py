"""The P/D and wide-EP rules fuzzed (issue 39): disaggregated services of every role size, with and
without expert parallel, on RDMA and plain pools, catalogued MoE and dense models and models stated in
part. Whatever is drawn, the stack rules refuse it with a ConfigError or accept it (no other exception,
no hang), InferenceService declared alone agrees on the roles' memory, and a memory refusal is never
made of a layout the formulas accept: each role's need is recomputed here from the model's figures
(weights and one sequence's KV cache over a role's GPUs; with expert parallel, the heaviest GPU's share
of the experts and the rest of the model over its rank's GPUs)."""

from __future__ import annotations

import math
import re
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gke_gpu.core.catalog import load_catalog
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.serving.kv_cache import tokens_in_flight
from gke_gpu.serving.model import ModelServerSettings
from gke_gpu.serving.model_catalog import catalogue, model_facts
from gke_gpu.stack.config import ConfigError, parse_settings
from tests.test_fuzz import fuzz, no_hang
from tests.test_fuzz_serving_fit import reference_need

MOE = sorted(m.name for m in catalogue().values() if m.moe)
DENSE = ["meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "google/gemma-3-27b-it"]
POOLS = [
    ("nvidia-h200-141gb", True),  # a3-ultragpu-8g, GPUDirect RDMA
    ("nvidia-b200", True),  # a4-highgpu-8g
    ("nvidia-h100-80gb", False),
    ("nvidia-l4", False),
]
ROLE_GPUS = [1, 2, 3, 4, 8, 16, 24, 32]
MEMORY = re.compile(r"cannot hold|leave the heaviest GPU")


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    accelerator, rdma = draw(st.sampled_from(POOLS))
    per_node = 8
    entry: dict[str, Any] = {
        "name": "chat",
        "pool": "gpus",
        "model": "gs://models-bucket/model",
        "gateway": True,
    }
    kind = draw(st.sampled_from(["moe", "dense", "stated"]))
    if kind == "stated":
        entry["modelInfo"] = draw(
            st.fixed_dictionaries(
                {"parameters": st.integers(1_000_000_000, 1_000_000_000_000)},
                optional={
                    "dtype": st.sampled_from(["bfloat16", "fp8", "int4"]),
                    "attentionHeads": st.sampled_from([32, 64, 128]),
                    "experts": st.sampled_from([8, 16, 64, 128, 256]),
                },
            )
        )
    else:
        entry["modelInfo"] = {"catalog": draw(st.sampled_from(MOE if kind == "moe" else DENSE))}
    roles = {
        role: {"replicas": draw(st.integers(1, 3)), "gpusPerReplica": draw(st.sampled_from(ROLE_GPUS))}
        for role in ("prefill", "decode")
    }
    entry["disaggregation"] = {**roles, "kvTransport": draw(st.sampled_from(["rdma", "tcp"]))}
    if draw(st.booleans()):
        entry["expertParallel"] = {"tensorParallel": draw(st.sampled_from([1, 2, 4, 8]))}
    entry |= draw(st.fixed_dictionaries({}, optional={"maxModelLen": st.sampled_from([4096, 32768, 131072])}))
    pool: dict[str, Any] = {
        "name": "gpus",
        "accelerator": accelerator,
        "gpusPerNode": per_node,
        "maxNodes": 16,
        "driverVersion": "LATEST",
        "diskSizeGb": 3000,
    }
    if rdma:
        pool |= {"gpudirect": True, "gpudirectNetworking": "dranet", "zones": ["us-central1-b"]}
    cluster = {"mode": "standard", "name": "gpu-fuzz", "minimumVersion": "1.34"}
    return {"cluster": cluster, "gpuPools": [pool], "serving": [entry]}


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {re.sub(r"([A-Z])", r"_\1", k).lower(): _snake(v) for k, v in value.items()}
    return value


def reference_role_need(entry: dict[str, Any], role: str, accelerator: str) -> int:
    """The role's need on the GPU the rules judge: a replica's, or with expert parallel the heaviest
    GPU's, recomputed from the figures (no code of the rules')."""
    settings = ModelServerSettings.model_validate(
        {k: v for k, v in entry.items() if k not in ("name", "pool", "gateway")}
    )
    model = model_facts(settings)
    assert model is not None
    gpu = load_catalog().accelerator(accelerator)
    assert gpu is not None
    in_flight = tokens_in_flight(gpu.gpu_memory_bytes, gpu.name)
    gpus = entry["disaggregation"][role]["gpusPerReplica"]
    ep = entry.get("expertParallel")
    if ep is None:
        return reference_need(model, entry.get("maxModelLen"), gpus, in_flight)
    tp = ep["tensorParallel"]
    total = model.weights_bytes if model.weights_bytes is not None else int((model.parameters or 0) * 0.5)
    experts, expert_bytes = model.experts, model.expert_bytes
    if experts is None or expert_bytes is None or expert_bytes > total:
        weights = math.ceil(total / gpus)
    else:
        weights = (total - expert_bytes) // tp + expert_bytes * math.ceil(experts / gpus) // experts
    kv = reference_need(model, entry.get("maxModelLen"), tp, in_flight) - (
        model.weights_bytes if model.weights_bytes is not None else int((model.parameters or 0) * 0.5)
    )
    return weights + kv // tp


@given(cases())
@fuzz(examples=150, deadline_ms=8000)
def test_a_role_memory_refusal_is_always_right_and_the_component_agrees(raw: dict[str, Any]) -> None:
    entry, pool = raw["serving"][0], raw["gpuPools"][0]
    with no_hang(15):
        try:
            parse_settings(raw, project="p-123456", region="us-central1", stack="fuzz")
            refused = ""
        except ConfigError as error:
            refused = str(error)
        args: dict[str, Any] = {
            "model": entry["model"],
            "model_info": _snake(entry["modelInfo"]),
            "node_selector": {"cloud.google.com/gke-accelerator": pool["accelerator"]},
            "tolerations": [],
            "project": "p-123456",
            "cluster_name": "gpu",
            "gpus_per_node": pool["gpusPerNode"],
            "disaggregation": _snake(entry["disaggregation"]),
            "disk_gib": 10_000,
        }
        if pool.get("gpudirect"):
            args["gpu_nics"] = {"flavor": "RDMA", "networking": "dranet"}
        for key in ("expertParallel", "maxModelLen"):
            if key in entry:
                args[re.sub(r"([A-Z])", r"_\1", key).lower()] = _snake(entry[key])
        try:
            InferenceService.check_args("chat", args)
            component = ""
        except InvalidArgsError as error:
            component = str(error)
    lines = [line for line in refused.splitlines() if MEMORY.search(line)]
    event("refused for memory" if lines else "refused" if refused else "accepted")
    # The component, told the same pool, refuses a role for memory exactly when the stack does.
    assert bool(lines) == bool(MEMORY.search(component)), (refused, component)
    for line in lines:
        role = "prefill" if ".prefill." in line else "decode"
        gpus = entry["disaggregation"][role]["gpusPerReplica"]
        gpu = load_catalog().accelerator(pool["accelerator"])
        assert gpu is not None
        utilization = 0.92
        ep = entry.get("expertParallel")
        usable = int(gpu.gpu_memory_bytes * utilization) * (1 if ep else gpus)
        need = reference_role_need(entry, role, pool["accelerator"])
        assert need > usable, (line, need, usable)
