"""Knowing the model (issue 24, items 3 and 4): the catalogue, `modelInfo`, and what follows from them
before anything is declared: GPU memory, tensor-parallel sizes, the context, the download disk, gating."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gke_gpu.core.catalog import load_catalog
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.fit import tensor_parallel_sizes
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.serving.model import ModelServerSettings
from gke_gpu.serving.model_catalog import catalogue, catalogued, weights_bytes
from gke_gpu.stack.config import parse_settings
from tests.conftest import L4_POOL, STANDARD_CLUSTER, config_error, render, service_args, stack_config

L4 = {**L4_POOL, "driverVersion": "LATEST"}
H100X8 = {
    "name": "h100",
    "accelerator": "nvidia-h100-80gb",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "driverVersion": "LATEST",
}
A100X8 = {
    "name": "a100",
    "accelerator": "nvidia-tesla-a100",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "driverVersion": "LATEST",
}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def stack(*services: dict[str, Any], pools: tuple[dict[str, Any], ...] = (L4,)) -> dict[str, Any]:
    return {"cluster": STANDARD_CLUSTER, "gpuPools": list(pools), "serving": list(services)}


def service(model: str, pool: str = "l4", **keys: Any) -> dict[str, Any]:
    return {"name": "chat", "pool": pool, "model": model, **keys}


def accepted(raw: dict[str, Any]) -> list[str]:
    _, warnings = parse_settings(raw, project="test-project", region="us-central1", stack="test")
    return warnings


def test_every_catalogue_entry_is_whole_and_sourced() -> None:
    models = catalogue()
    names = {m.name for m in models.values()}
    for wanted in (
        "meta-llama/Llama-3.2-1B-Instruct",
        "meta-llama/Llama-3.2-3B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
        "Qwen/Qwen3-8B",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "google/gemma-2-9b-it",
        "google/gemma-3-1b-it",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
    ):
        assert wanted in names
    for facts in models.values():
        assert facts.source
        if facts.attention_heads and facts.kv_heads:
            assert facts.attention_heads % facts.kv_heads == 0, facts.name
    # Computed from config.json's shapes: the published 8.03B, in bfloat16.
    assert catalogued("META-LLAMA/llama-3.1-8b-instruct").weights_bytes == 8_030_261_248 * 2  # type: ignore[union-attr]
    # Llama 3.3 70B has 3.1 70B's shapes (Meta's own arch_args: tests/test_serving_catalogue.py).
    assert catalogued("meta-llama/Llama-3.3-70B-Instruct").weights_bytes == 70_553_706_496 * 2  # type: ignore[union-attr]
    # An unverified figure is unknown, never used: Llama 4's config.json was not read.
    assert catalogued("meta-llama/Llama-4-Scout-17B-16E-Instruct").layers is None  # type: ignore[union-attr]


def test_weights_bytes_comes_from_the_catalogue_or_model_info() -> None:
    def size(**keys: Any) -> int | None:
        return weights_bytes(ModelServerSettings.model_validate({"model": "gs://b/m", **keys}))

    assert size() is None  # a bucket path is never matched by its name
    assert size(modelInfo={"catalog": "Qwen/Qwen3-8B"}) == 8_190_735_360 * 2
    assert size(modelInfo={"parameters": 1_000_000_000, "dtype": "fp8"}) == 1_000_000_000


def test_a_70b_model_on_one_l4_is_refused_with_both_sizes_and_what_fits() -> None:
    message = config_error(
        stack(service("meta-llama/Llama-3.1-70B-Instruct", hfTokenSecret="hf", maxModelLen=8192))
    )
    line = next(line for line in message.splitlines() if "gpusPerReplica" in line)
    assert (
        "1 nvidia-l4 GPU(s) (22.03 GiB each as the device reports it, as vLLM logs it (UNVERIFIED); 0.92 of "
        "it for vLLM: 20.3 GiB)"
    ) in line
    assert "weights 131.4 GiB + the KV cache of one 8192-token sequence 2.5 GiB" in line
    assert "use 8 nvidia-l4 GPUs" in line


def test_gpu_memory_is_counted_as_the_device_reports_it_not_as_sold() -> None:
    """vLLM's budget is --gpu-memory-utilization of the memory CUDA reports (measured on an H100 80GB:
    85.0e9 bytes; vLLM logs 22.03 GiB, 23.65e9, on an L4). Counting the sold "80 GB" as 80e9 bytes refused
    models an H100 holds; counting "24 GB" as 24e9 accepted models an L4 does not."""
    # 75e9 bytes of weights: over 0.92 x 80e9 = 73.6e9, under 0.92 x 85.0e9 = 78.2e9.
    h100 = stack(
        service(
            "gs://models-bucket/m",
            pool="h100",
            gpusPerReplica=1,
            modelInfo={"parameters": 37_500_000_000, "dtype": "bfloat16"},
        ),
        pools=(H100X8,),
    )
    assert not [n for n in accepted(h100) if "cannot hold" in n]
    # 21.9e9 bytes: under 0.92 x 24e9 = 22.08e9, over 0.92 x 23.65e9 = 21.76e9.
    l4 = stack(service("gs://models-bucket/m", modelInfo={"parameters": 10_950_000_000, "dtype": "bfloat16"}))
    assert "gke-gpu:serving[0].gpusPerReplica: 1 nvidia-l4 GPU(s) (22.03 GiB each" in config_error(l4)


def test_every_device_memory_figure_is_sourced_and_near_what_is_sold() -> None:
    header = (Path(__file__).parent.parent / "components" / "data" / "accelerators.yaml").read_text()
    measured = [a for a in load_catalog().accelerators.values() if a.device_memory_bytes is not None]
    assert {a.name for a in measured} >= {"nvidia-h100-80gb", "nvidia-h200-141gb", "nvidia-l4"}
    for accelerator in measured:
        assert f"#   {accelerator.device_memory_source} " in header, accelerator.name
        assert 0.9 < accelerator.gpu_memory_bytes / (accelerator.memory_gb * 1e9) < 1.1, accelerator.name
    # The measured figures are what tools/gpu_memory_check.py printed on the GPU (tests/device/README.md).
    for kind, name in (("h100", "nvidia-h100-80gb"), ("h200", "nvidia-h200-141gb")):
        record = json.loads((Path(__file__).parent / "device" / f"gpu_memory_check-{kind}.json").read_text())
        accelerator = load_catalog().accelerator(name)
        assert accelerator is not None and record["gpuType"] == name
        assert accelerator.device_memory_source == "DEV"
        assert accelerator.gpu_memory_bytes == record["totalBytes"]
    unmeasured = load_catalog().accelerator("nvidia-tesla-t4")
    assert unmeasured is not None and unmeasured.gpu_memory_bytes == 16 * 10**9
    assert "16 GB each as sold" in unmeasured.gpu_memory_basis


def test_a_model_that_fits_is_accepted_and_gpu_memory_utilization_reaches_vllm() -> None:
    raw = stack(service("Qwen/Qwen3-8B", maxModelLen=4096, gpuMemoryUtilization=0.85))
    result = render(stack_config(**raw))
    (container,) = result.one(DEPLOYMENT).inputs["spec"]["template"]["spec"]["containers"]
    assert "--gpu-memory-utilization=0.85" in container["args"]
    # A public model: no token Secret, and the Pod reads none.
    assert all(e["name"] != "HF_TOKEN" for e in container["env"])


def test_the_context_counts_against_the_gpus_memory() -> None:
    # Qwen3-8B in 16 bits (15.3 GiB) fits an L4 with a short context, not with its full 40,960 tokens.
    notes = accepted(stack(service("Qwen/Qwen3-8B", maxModelLen=4096)))
    assert [n for n in notes if "is gated is not known" not in n] == []
    message = config_error(stack(service("Qwen/Qwen3-8B")))
    assert "KV cache of one 40960-token sequence 5.6 GiB" in message and "or a shorter maxModelLen" in message


def test_a_tensor_parallel_size_must_divide_the_heads() -> None:
    # Qwen2.5-7B: 28 attention heads, 4 KV heads; 8 GPUs a replica cannot split them.
    message = config_error(
        stack(service("Qwen/Qwen2.5-7B-Instruct", pool="a100", gpusPerReplica=8), pools=(A100X8,))
    )
    assert (
        "gke-gpu:serving[0].gpusPerReplica: 8 GPUs a node is not a tensor-parallel size vLLM takes for "
        "Qwen/Qwen2.5-7B-Instruct: it splits the 28 attention heads (4 KV heads) evenly over them; sizes "
        "that work: 1, 2, 4"
    ) in message
    assert tensor_parallel_sizes(catalogued("Qwen/Qwen3-8B"), 16) == [1, 2, 4, 8, 16]  # type: ignore[arg-type]


def test_a_replica_size_that_strands_gpus_is_refused() -> None:
    message = config_error(
        stack(service("gs://models-bucket/m", pool="h100", gpusPerReplica=3), pools=(H100X8,))
    )
    assert (
        "gke-gpu:serving[0].gpusPerReplica: 3 leaves 2 of pool h100's 8 GPUs a node unused (a replica's GPUs "
        "are on one node); sizes that use them all: 1, 2, 4, 8"
    ) in message


def test_max_model_len_over_the_models_context_is_refused() -> None:
    message = config_error(stack(service("Qwen/Qwen3-0.6B", maxModelLen=65536)))
    assert (
        "gke-gpu:serving[0].maxModelLen: 65536 is more than Qwen/Qwen3-0.6B's context, 40960 tokens "
        "(config.json's max_position_embeddings), which vLLM refuses to exceed; use at most 40960"
    ) in message


def test_weights_larger_than_the_download_disk_are_refused() -> None:
    # a2-highgpu-8g has no Local SSD: the download goes to a quarter of the boot disk.
    llama70 = service("meta-llama/Llama-3.1-70B-Instruct", pool="a100", gpusPerReplica=8, hfTokenSecret="hf")
    message = config_error(stack(llama70, pools=({**A100X8, "diskSizeGb": 200},)))
    assert (
        "gke-gpu:serving[0].model: meta-llama/Llama-3.1-70B-Instruct's weights, 131.4 GiB, do not fit the "
        "50 GiB the server downloads them to (a quarter of pool a100's 200 GB boot disk): raise its "
        "diskSizeGb to at least 532, or serve the model from a gs:// bucket"
    ) in message
    assert accepted(stack({**llama70, "maxModelLen": 8192}, pools=({**A100X8, "diskSizeGb": 600},))) == []


def test_a_download_on_a_local_ssd_pool_is_judged_against_the_local_ssd() -> None:
    # a3-highgpu-8g puts its ephemeral storage on its 16 bundled Local SSDs (GpuPool.node_ephemeral_
    # storage_gib): a 200 GB boot disk does not limit the download (it used to be refused, "raise
    # diskSizeGb", which would not have helped: the emptyDir is on the SSDs).
    llama70 = service("meta-llama/Llama-3.1-70B-Instruct", pool="h100", gpusPerReplica=8, hfTokenSecret="hf")
    assert accepted(stack({**llama70, "maxModelLen": 8192}, pools=({**H100X8, "diskSizeGb": 200},))) == []


def test_only_a_gated_model_needs_a_token() -> None:
    assert "hfTokenSecret: required" in config_error(stack(service("meta-llama/Llama-3.2-1B-Instruct")))
    # Gating not known (the card's copy had no front matter): accepted, with a note, never refused.
    notes = accepted(stack(service("mistralai/Mistral-7B-Instruct-v0.3", maxModelLen=4096)))
    assert notes == [
        "note: gke-gpu:serving[0].hfTokenSecret: whether mistralai/Mistral-7B-Instruct-v0.3 is gated is not "
        "known here; if it is, the download fails (401) until hfTokenSecret names a Secret holding a token"
    ]
    assert accepted(stack(service("meta-llama/Llama-3.2-1B-Instruct", hfTokenSecret="hf"))) == []


def test_an_unknown_model_is_not_guessed() -> None:
    notes = accepted(stack(service("someone/some-model")))
    assert notes == [
        "note: gke-gpu:serving[0].model: 'someone/some-model' is not in the model catalogue and has no "
        "modelInfo: its size, heads and context are not checked (state modelInfo with its config.json's "
        "figures, or the catalogued model it is a copy of)"
    ]


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (
            {"catalog": "acme/unknown"},
            "gke-gpu:serving[0].modelInfo.catalog: 'acme/unknown' is not in the catalogue; catalogued: ",
        ),
        ({}, "gke-gpu:serving[0].modelInfo: states nothing"),
        ({"catalog": "Qwen/Qwen3-8B", "parameters": 8_000_000_000}, "states parameters as well as catalog"),
        ({"attentionHeads": 32, "kvHeads": 5}, "modelInfo.kvHeads: 5 does not divide attentionHeads 32"),
        (
            {"attentionHeads": 36, "parameters": 10_000_000_000, "dtype": "bfloat16"},
            "gpusPerReplica: 8 GPUs a node is not a tensor-parallel size vLLM takes for model_info",
        ),
        ({"maxContext": 4096}, "maxModelLen: 8192 is more than model_info's context, 4096 tokens"),
        ({"gated": True}, "hfTokenSecret: required: model_info is gated on Hugging Face"),
    ],
)
def test_model_info_is_checked_and_used(info: dict[str, Any], expected: str) -> None:
    entry = service("acme/private-model", pool="h100", gpusPerReplica=8, maxModelLen=8192, modelInfo=info)
    assert expected in config_error(stack(entry, pools=(H100X8,)))


def test_the_component_knows_the_model_too() -> None:
    args = service_args(
        "a100", "Qwen/Qwen2.5-7B-Instruct", gpus_per_replica=8, max_model_len=65536, disk_gib=10
    )
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("chat", args)
    text = str(refused.value)
    assert "gpus_per_replica: 8 GPUs a node is not a tensor-parallel size" in text
    assert "max_model_len: 65536 is more than Qwen/Qwen2.5-7B-Instruct's context, 32768 tokens" in text
    assert "do not fit the 10 GiB the server downloads them to (disk_gib): raise disk_gib" in text
    public = {**args, "gpus_per_replica": 4, "max_model_len": 8192, "disk_gib": 50}
    assert InferenceService.check_args("chat", public).hf_token_secret is None
