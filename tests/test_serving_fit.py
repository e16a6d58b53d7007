"""Serving whose rules travel with it (issue 35): InferenceService, declared from a program of one's own,
runs the fit rules the stack file runs (serving/fit.py), so both refuse the same inputs, each naming its
own keys; what is known of a model is used (a partial modelInfo still decides what its figures decide,
and the render says which checks did not run and which keys would let them); messages name the key the
user must change."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.serving.service_rules import service_notes
from gke_gpu.serving.service_spec import InferenceServiceSpec
from tests.conftest import config_error
from tests.test_serving_models import H100X8, service, stack
from tests.test_serving_models import accepted as warnings_of
from tools.offline import run_program

L4_SELECTOR = {"cloud.google.com/gke-accelerator": "nvidia-l4", "cloud.google.com/gke-nodepool": "l4"}
# Llama 3.3 70B: the catalogue's figures for it were unverified, and so unused, before issue 35.
ARGS = {
    "model": "meta-llama/Llama-3.3-70B-Instruct",
    "hf_token_secret": "hf-token",
    "node_selector": L4_SELECTOR,
    "tolerations": [],
    "project": "p-123456",
    "cluster_name": "gpu",
    # Enough disk for the download: only the GPUs' memory is short.
    "disk_gib": 400,
}


def declare_alone(args: dict[str, Any]):
    def program() -> None:
        import pulumi_kubernetes as k8s

        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        InferenceService("chat", args, opts=pulumi.ResourceOptions(provider=provider))

    return run_program({}, program=program)


# Done when: 70B on one L4 with enough disk is refused from a program of one's own and from the stack file.


def test_the_component_alone_refuses_70b_on_one_l4_before_declaring_anything() -> None:
    result = declare_alone(ARGS)
    assert isinstance(result.error, InvalidArgsError)
    (problem,) = [p for p in result.error.problems if p.path == "gpus_per_replica"]
    assert problem.reason.startswith("1 nvidia-l4 GPU(s) (22.03 GiB each")
    assert "cannot hold meta-llama/Llama-3.3-70B-Instruct: weights 131.4 GiB" in problem.reason
    # At the model's own 128K context the KV cache of one sequence is 40 GiB more.
    assert "+ the KV cache of one 131072-token sequence 40.0 GiB; use 16 nvidia-l4 GPUs" in problem.reason
    assert problem.reason.endswith("or a shorter max_model_len")
    # Nothing declared, the component itself included (the provider is the program's own).
    assert [r.type for r in result.resources] == ["pulumi:providers:kubernetes"]


def test_the_stack_file_refuses_the_same_with_its_own_key() -> None:
    message = config_error(stack(service("meta-llama/Llama-3.3-70B-Instruct", hfTokenSecret="hf")))
    line = next(line for line in message.splitlines() if "cannot hold" in line)
    assert line.startswith("  - gke-gpu:serving[0].gpusPerReplica: 1 nvidia-l4 GPU(s) (22.03 GiB each")
    assert line.endswith("or a shorter maxModelLen")


def test_the_component_learns_its_gpu_from_the_arg_or_the_node_selector() -> None:
    compute_class = {"cloud.google.com/compute-class": "gpu-l4"}
    # A ComputeClass selector names no GPU: accelerator gives it.
    with pytest.raises(InvalidArgsError, match="gpus_per_replica: 1 nvidia-l4 GPU"):
        InferenceService.check_args(
            "chat", {**ARGS, "node_selector": compute_class, "accelerator": "nvidia-l4"}
        )
    # Without it, the GPUs' memory is not checked, and a warning says so and how to have it checked.
    spec = InferenceService.check_args("chat", {**ARGS, "node_selector": compute_class})
    (note,) = service_notes(spec)
    assert note.startswith("note: model_info: not checked for meta-llama/Llama-3.3-70B-Instruct")
    assert "give accelerator, or a node_selector with cloud.google.com/gke-accelerator" in note
    # A GPU the selector does not pick, or one the package does not know, is refused by name.
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("chat", {**ARGS, "accelerator": "nvidia-h100-80gb"})
    assert "accelerator: 'nvidia-h100-80gb' is not the GPU node_selector picks" in str(refused.value)
    with pytest.raises(
        InvalidArgsError, match=r"accelerator: 'nvidia-l4x' is not a GPU type this package knows"
    ):
        InferenceService.check_args(
            "chat", {**ARGS, "node_selector": compute_class, "accelerator": "nvidia-l4x"}
        )
    # On H100s the same model fits: the rules are the GPU's, not a blanket refusal.
    h100 = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    fitted = InferenceService.check_args(
        "chat", {**ARGS, "node_selector": h100, "gpus_per_replica": 4, "max_model_len": 8192}
    )
    assert isinstance(fitted, InferenceServiceSpec) and service_notes(fitted) == []


def test_a_plain_program_is_warned_of_what_was_not_checked() -> None:
    args = {**ARGS, "model": "gs://models-bucket/m", "model_info": {"parameters": 7_000_000_000}}
    del args["hf_token_secret"]
    result = declare_alone(args)
    assert result.error is None, result.error
    (warning,) = [w for w in result.warnings if "not checked" in w]
    assert "note: InferenceService 'chat': model_info: not checked for the model" in warning
    assert "(model_info.dtype)" in warning and "model_info.head_dim" in warning


# Bad input, from the stack file and the component alike.


@pytest.mark.parametrize(
    ("keys", "args", "expected_stack", "expected_args"),
    [
        pytest.param(
            {"model": "gs://models-bucket/m", "modelInfo": {"parameters": 70_000_000_000}},
            {"model": "gs://models-bucket/m", "model_info": {"parameters": 70_000_000_000}},
            "gke-gpu:serving[0].gpusPerReplica: 1 nvidia-l4 GPU(s)",
            "gpus_per_replica: 1 nvidia-l4 GPU(s)",
            id="weights-alone-too-large-from-parameters-only",
        ),
        pytest.param(
            {"model": "meta-llama/Llama-3.1-8B-Instruct", "hfTokenSecret": "hf", "maxModelLen": 131072},
            {"model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 131072},
            "the KV cache of one 131072-token sequence 16.0 GiB",
            "the KV cache of one 131072-token sequence 16.0 GiB",
            id="kv-cache-of-one-sequence",
        ),
        pytest.param(
            {"model": "google/gemma-3-1b-it"},
            {"model": "google/gemma-3-1b-it", "hf_token_secret": None},
            "gke-gpu:serving[0].hfTokenSecret: required: google/gemma-3-1b-it is gated",
            "hf_token_secret: required: google/gemma-3-1b-it is gated",
            id="gated-gemma-without-token",
        ),
    ],
)
def test_bad_input_is_refused_from_both_sides(
    keys: dict[str, Any], args: dict[str, Any], expected_stack: str, expected_args: str
) -> None:
    assert expected_stack in config_error(stack(service(**keys)))
    given = {**ARGS, **args}
    given = {k: v for k, v in given.items() if v is not None}
    if given["model"].startswith("gs://"):
        given.pop("hf_token_secret", None)
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("chat", given)
    assert expected_args in str(refused.value)


def test_a_sliding_window_model_is_judged_by_its_window_not_refused_by_full_context() -> None:
    """Gemma 3 27B at its full 128K context on one H100: counting every layer at full context (62 x
    131072 tokens x 8 KiB = 62 GiB) refused it; vLLM keeps the 52 sliding layers' window and the tokens
    in flight only, 13.7 GiB in all, beside 50.3 GiB of weights, within the H100's 72.8: it fits."""
    gemma = service(
        "google/gemma-3-27b-it", pool="h100", hfTokenSecret="hf", maxModelLen=131072, gpusPerReplica=1
    )
    h100 = {**H100X8, "gpusPerNode": 1, "machineType": "a3-highgpu-1g"}
    assert not [w for w in warnings_of(stack(gemma, pools=(h100,))) if "cannot hold" in w]
    args = {
        **ARGS,
        "model": "google/gemma-3-27b-it",
        "max_model_len": 131072,
        "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
    }
    InferenceService.check_args("chat", args)


# Use what is known (review n15, n15b, n18).


def test_a_partial_model_info_runs_what_its_figures_decide_and_says_what_did_not_run() -> None:
    small = service("gs://models-bucket/m", modelInfo={"parameters": 7_000_000_000})
    notes = [w for w in warnings_of(stack(small)) if "not checked" in w]
    assert notes == [
        "note: gke-gpu:serving[0].modelInfo: not checked for the model: the weights' exact size: they are "
        "counted at 4 bits a weight, the fewest any dtype takes (modelInfo.dtype); the KV cache of one "
        "sequence, for the GPUs' memory (modelInfo.layers, modelInfo.headDim, modelInfo.attentionHeads, "
        "modelInfo.maxContext, or maxModelLen); the tensor-parallel size (modelInfo.attentionHeads, "
        "modelInfo.kvHeads); to check them, state them in modelInfo"
    ]
    # 70B parameters on one L4 cannot fit even at 4 bits a weight: refused, without a dtype.
    big = service("gs://models-bucket/m", modelInfo={"parameters": 70_000_000_000})
    assert "weights at least 32.6 GiB (at 4 bits a weight)" in config_error(stack(big))


@pytest.mark.parametrize(
    ("info", "says"),
    [
        ({"parameters": 671_000_000_000, "experts": 256}, "only counted with dtype"),
        ({"parameters": 671_000_000_000, "dtype": "fp8"}, "only counted with experts"),
        ({"parameters": 671_000_000_000}, "only counted with experts and dtype"),
        (
            {"parameters": 600_000_000_000, "experts": 256, "dtype": "fp8"},
            "654000000000 is more than parameters 600000000000",
        ),
    ],
)
def test_expert_parameters_that_would_go_uncounted_or_exceed_the_model_are_refused(
    info: dict[str, Any], says: str
) -> None:
    # Without experts and dtype the fit rules had no use for them and said nothing (review of issue 39).
    bad = service("gs://models-bucket/m", modelInfo={**info, "expertParameters": 654_000_000_000})
    message = config_error(stack(bad))
    assert f"gke-gpu:serving[0].modelInfo.expertParameters: {says}" in message


def test_llama_405b_on_one_h100_node_is_refused_from_the_catalogue() -> None:
    message = config_error(
        stack(
            service("meta-llama/Llama-3.1-405B-Instruct", pool="h100", gpusPerReplica=8, hfTokenSecret="hf"),
            pools=({**H100X8, "maxNodes": 4, "localSsdCount": 16, "machineType": "a3-highgpu-8g"},),
        )
    )
    line = next(line for line in message.splitlines() if "cannot hold" in line)
    assert line.startswith("  - gke-gpu:serving[0].gpusPerReplica: 8 nvidia-h100-80gb GPU(s)")
    assert "weights 756.0 GiB" in line and "use 16 nvidia-h100-80gb GPUs" in line


def test_a_catalogued_model_with_unverified_figures_says_which_checks_did_not_run() -> None:
    notes = [
        w
        for w in warnings_of(
            stack(service("Qwen/Qwen3-235B-A22B", pool="h100", gpusPerReplica=8), pools=(H100X8,))
        )
        if "not checked" in w
    ]
    (note,) = notes
    assert note.startswith(
        "note: gke-gpu:serving[0].modelInfo: not checked for Qwen/Qwen3-235B-A22B, whose catalogue entry "
        "lacks the figures:"
    )
    assert "(modelInfo.dtype)" in note and "modelInfo.headDim" in note
    assert note.endswith("state the figures of its config.json in modelInfo (instead of a catalogue entry)")


# Messages name the key to change (review e05).


def test_two_gpus_a_replica_on_one_gpu_nodes_blames_gpus_per_replica() -> None:
    message = config_error(
        stack(service("gs://models-bucket/m", gpusPerReplica=2, replicas={"min": 1, "max": 2}))
    )
    (line,) = [line for line in message.splitlines() if "need 4 GPUs" in line]
    assert line.startswith(
        "  - gke-gpu:serving[0].gpusPerReplica: 2 spans 2 of pool l4's nodes (1 GPU(s) each)"
    )
    assert "lower gpusPerReplica to 1, give the pool machines with 2 GPUs (its gpusPerNode)" in line
    assert ".replicas:" not in message
