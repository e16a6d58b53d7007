"""Bad input for a disaggregated service and wide expert parallel (issue 39): each is refused before
anything is declared, naming the key and why, from the stack file (camelCase under gke-gpu:serving[i])
and from InferenceService alone (snake_case args) alike; one run lists every independent problem."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.serving.service_rules import service_notes
from gke_gpu.serving.service_spec import InferenceServiceSpec
from tests.conftest import STANDARD_CLUSTER, config_error, settings
from tools.offline import run_program

KEY = "gke-gpu:serving[0]"
A3U = {
    "name": "a3u",
    "accelerator": "nvidia-h200-141gb",
    "gpusPerNode": 8,
    "maxNodes": 6,
    "zones": ["us-central1-b"],
    "gpudirect": True,
    "gpudirectNetworking": "dranet",
    "driverVersion": "LATEST",
}
L4 = {"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 1, "maxNodes": 4, "driverVersion": "LATEST"}
A3HIGH = {
    "name": "a3",
    "accelerator": "nvidia-h100-80gb",
    "gpusPerNode": 8,
    "maxNodes": 4,
    "zones": ["us-central1-a"],
    "gpudirect": True,
    "driverVersion": "LATEST",
}
PD = {
    "name": "chat",
    "pool": "a3u",
    "model": "gs://models-bucket/llama-70b",
    "modelInfo": {"catalog": "meta-llama/Llama-3.1-70B-Instruct"},
    "maxModelLen": 32768,
    "gateway": True,
    "disaggregation": {"prefill": {"replicas": 2, "gpusPerReplica": 2}, "decode": {"gpusPerReplica": 4}},
}
EP = {
    **PD,
    "model": "gs://models-bucket/deepseek-r1",
    "modelInfo": {"catalog": "deepseek-ai/DeepSeek-R1"},
    "expertParallel": {},
    "disaggregation": {"prefill": {"gpusPerReplica": 16}, "decode": {"gpusPerReplica": 16}},
}


def stack(
    service: dict[str, Any], pool: dict[str, Any] = A3U, cluster: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "cluster": cluster or {**STANDARD_CLUSTER, "minimumVersion": "1.34"},
        "gpuPools": [pool],
        "serving": [service],
    }


def with_(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out.update(changes)
    return out


def pd(prefill: dict[str, Any], decode: dict[str, Any], **rest: Any) -> dict[str, Any]:
    return {"prefill": prefill, "decode": decode, **rest}


def problems(message: str) -> list[str]:
    return [line.strip()[2:] for line in message.splitlines() if line.strip().startswith("- ")]


def test_the_example_shape_is_accepted_from_both_sides() -> None:
    assert settings(stack(PD)).serving[0].disaggregation is not None
    assert settings(stack(EP)).serving[0].expert_parallel is not None


REFUSED = [
    # P/D on a pool without RDMA NICs, unless tcp is said.
    (
        stack(with_(PD, pool="l4", disaggregation=pd({"gpusPerReplica": 1}, {"gpusPerReplica": 1})), L4),
        f"{KEY}.disaggregation.kvTransport: rdma needs the GPU NICs of a GPUDirect RDMA pool: pool l4 has no "
        "gpudirect",
    ),
    (
        stack(with_(PD, pool="a3"), A3HIGH),
        f"{KEY}.disaggregation.kvTransport: rdma needs the GPU NICs of a GPUDirect RDMA pool: pool "
        "a3's GPUDirect "
        "is TCPX",
    ),
    # Parallelism the model cannot split: 28 heads over 8 GPUs (Qwen2.5-7B).
    (
        stack(
            with_(
                PD,
                modelInfo={"catalog": "Qwen/Qwen2.5-7B-Instruct"},
                disaggregation=pd({"gpusPerReplica": 4}, {"gpusPerReplica": 8}),
            )
        ),
        f"{KEY}.disaggregation.decode.gpusPerReplica: 8 GPUs a node is not a tensor-parallel size "
        "vLLM takes for "
        "Qwen/Qwen2.5-7B-Instruct",
    ),
    # A role replica over nodes without expert parallel.
    (
        stack(with_(PD, disaggregation=pd({"gpusPerReplica": 2}, {"gpusPerReplica": 16}))),
        f"{KEY}.disaggregation.decode.gpusPerReplica: 16 is more than a node's 8 GPUs: a "
        "disaggregated role's "
        "replica runs on one node",
    ),
    # A role that strands the node's GPUs.
    (
        stack(with_(PD, disaggregation=pd({"gpusPerReplica": 3}, {"gpusPerReplica": 4}))),
        f"{KEY}.disaggregation.prefill.gpusPerReplica: 3 leaves 2 of pool a3u's 8 GPUs a node unused",
    ),
    # Wide EP for a dense model.
    (
        stack(
            with_(
                EP,
                model="gs://models-bucket/llama-70b",
                modelInfo={"catalog": "meta-llama/Llama-3.1-70B-Instruct"},
            )
        ),
        f"{KEY}.expertParallel: not allowed for meta-llama/Llama-3.1-70B-Instruct, a dense model",
    ),
    # More expert-parallel ranks than experts (Mixtral: 8).
    (
        stack(
            with_(
                EP,
                model="gs://models-bucket/mixtral",
                modelInfo={"catalog": "mistralai/Mixtral-8x7B-Instruct-v0.1"},
                disaggregation=pd({"gpusPerReplica": 16}, {"gpusPerReplica": 16}),
            )
        ),
        f"{KEY}.disaggregation.prefill.gpusPerReplica: 16 expert-parallel ranks are more than "
        "mistralai/Mixtral-8x7B-Instruct-v0.1's 8 experts a layer",
    ),
    # DeepEP: privileged Pods and llm-d's image.
    (
        stack(with_(EP, expertParallel={"allToAll": "deepepHighThroughput"})),
        f"{KEY}.expertParallel.allToAll: deepepHighThroughput is refused: DeepEP's all-to-all needs "
        "privileged Pods",
    ),
    # Expert parallel alone.
    (
        stack(with_(EP, disaggregation=None)),
        f"{KEY}.expertParallel: only allowed with disaggregation",
    ),
    # An expert-parallel role not of whole nodes.
    (
        stack(with_(EP, disaggregation=pd({"gpusPerReplica": 12}, {"gpusPerReplica": 16}))),
        f"{KEY}.disaggregation.prefill.gpusPerReplica: 12 is not a whole multiple of a node's 8 GPUs",
    ),
    # One data-parallel rank a Pod: the supervisor needs two.
    (
        stack(with_(EP, expertParallel={"tensorParallel": 8})),
        f"{KEY}.expertParallel.tensorParallel: 8 leaves prefill's Pods of 8 GPU(s) one data-parallel rank",
    ),
    # The roles' Pods run different ranks: the pool's target ports would not fit both.
    (
        stack(with_(EP, disaggregation=pd({"gpusPerReplica": 4}, {"gpusPerReplica": 16}))),
        f"{KEY}.disaggregation.decode.gpusPerReplica: 16 gives decode's Pods 8 GPUs and prefill's 4",
    ),
    # Without the gateway nothing disaggregates.
    (stack(with_(PD, gateway=False)), f"{KEY}.gateway: required with disaggregation"),
    # The service's own sizing keys are the roles'.
    (stack(with_(PD, gpusPerReplica=8)), f"{KEY}.gpusPerReplica: not allowed with disaggregation"),
    (stack(with_(PD, replicas={"min": 1, "max": 2})), f"{KEY}.replicas: not allowed with disaggregation"),
    (stack(with_(PD, scaleOn="queue")), f"{KEY}.scaleOn: not allowed with disaggregation"),
    # On a multiNetwork pool a role's Pod takes a whole node to get the NICs.
    (
        {
            **stack(PD, {**A3U, "gpudirectNetworking": "multiNetwork"}),
            "network": {"gpudirectCidr": "192.168.0.0/16"},
        },
        f"{KEY}.disaggregation.prefill.gpusPerReplica: 2 takes 2 of a node's 8 GPUs, and on a "
        "multiNetwork pool",
    ),
    # Prefill's tensor parallel above decode's, replicating the KV heads (2): vLLM's NIXL reader refuses it.
    (
        stack(
            with_(
                PD,
                model="gs://models-bucket/custom",
                modelInfo={
                    "parameters": 2_000_000_000,
                    "dtype": "bfloat16",
                    "attentionHeads": 32,
                    "kvHeads": 2,
                },
                disaggregation=pd({"gpusPerReplica": 4}, {"gpusPerReplica": 2}),
            )
        ),
        f"{KEY}.disaggregation.decode.gpusPerReplica: 2 is below prefill's 4 GPUs, which replicate "
        "model_info's 2 KV "
        "heads",
    ),
    # The GPUs' memory, per role: 70B on one H200 a prefill replica.
    (
        stack(with_(PD, maxModelLen=None, disaggregation=pd({"gpusPerReplica": 1}, {"gpusPerReplica": 4}))),
        f"{KEY}.disaggregation.prefill.gpusPerReplica: 1 nvidia-h200-141gb GPU(s)",
    ),
    # Expert parallel on too few GPUs: DeepSeek-R1 on 8 H100s (80 GB) cannot hold a rank's share.
    (
        stack(
            with_(EP, disaggregation=pd({"gpusPerReplica": 8}, {"gpusPerReplica": 8})),
            {**A3U, "accelerator": "nvidia-h100-80gb", "gpudirect": False, "gpudirectNetworking": None},
        ),
        f"{KEY}.disaggregation.prefill.gpusPerReplica: 8 nvidia-h100-80gb GPUs of expert parallel "
        "(tensor parallel "
        "1) leave the heaviest GPU",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), REFUSED, ids=range(len(REFUSED)))
def test_bad_input_is_refused_with_the_key_and_why(raw: dict[str, Any], expected: str) -> None:
    raw = copy.deepcopy(raw)
    for service in raw["serving"]:
        for key in [k for k, v in service.items() if v is None]:
            del service[key]
    for pool in raw["gpuPools"]:
        for key in [k for k, v in pool.items() if v is None]:
            del pool[key]
    found = problems(config_error(raw))
    assert any(p.startswith(expected) for p in found), found


def test_tcp_said_explicitly_is_accepted_with_its_cost() -> None:
    service = with_(
        PD, pool="l4", disaggregation=pd({"gpusPerReplica": 1}, {"gpusPerReplica": 1}, kvTransport="tcp")
    )
    service["model"], service["modelInfo"] = (
        "gs://models-bucket/qwen",
        {"catalog": "Qwen/Qwen2.5-1.5B-Instruct"},
    )
    settings(stack(service, L4))  # no error


def test_one_run_lists_every_independent_problem() -> None:
    raw = stack(with_(EP, gateway=False, scaleOn="queue", expertParallel={"allToAll": "deepepLowLatency"}))
    found = problems(config_error(raw))
    keys = sorted(p.split(":", 2)[1] for p in found)
    assert keys == sorted(
        ["serving[0].gateway", "serving[0].scaleOn", "serving[0].expertParallel.allToAll"]
    ), found


def test_a_broken_role_brings_no_follow_on_fit_problem() -> None:
    """A role refused for its shape is not also judged for its memory or heads."""
    found = problems(
        config_error(stack(with_(PD, disaggregation=pd({"gpusPerReplica": 2}, {"gpusPerReplica": 24}))))
    )
    assert len(found) == 1 and "24 is more than a node's 8 GPUs" in found[0], found


# ---- InferenceService alone -------------------------------------------------------------------


ARGS: dict[str, Any] = {
    "name": "chat",
    "model": "gs://models-bucket/llama-70b",
    "model_info": {"catalog": "meta-llama/Llama-3.1-70B-Instruct"},
    "max_model_len": 32768,
    "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
    "tolerations": [],
    "project": "p-123456",
    "cluster_name": "gpu",
    "gpus_per_node": 8,
    "gpu_nics": {"flavor": "RDMA", "networking": "dranet"},
    "disaggregation": {"prefill": {"replicas": 2, "gpus_per_replica": 2}, "decode": {"gpus_per_replica": 4}},
}


def declare_alone(args: dict[str, Any]):
    def program() -> None:
        import pulumi_kubernetes as k8s

        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        InferenceService("chat", args, opts=pulumi.ResourceOptions(provider=provider))

    return run_program({}, program=program)


COMPONENT_REFUSED = [
    (
        {"gpu_nics": None},
        "disaggregation.kv_transport",
        "rdma needs the GPU NICs of a GPUDirect RDMA pool: give gpu_nics",
    ),
    ({"replicas": 2}, "replicas", "not allowed with disaggregation"),
    ({"max_replicas": 3}, "max_replicas", "not allowed with disaggregation"),
    ({"gpus_per_replica": 4}, "gpus_per_replica", "not allowed with disaggregation"),
    (
        {"disaggregation": {"prefill": {"gpus_per_replica": 2}, "decode": {"gpus_per_replica": 16}}},
        "disaggregation.decode.gpus_per_replica",
        "16 is more than a node's 8 GPUs",
    ),
    (
        {
            "model_info": {"catalog": "Qwen/Qwen2.5-7B-Instruct"},
            "disaggregation": {"prefill": {"gpus_per_replica": 4}, "decode": {"gpus_per_replica": 8}},
        },
        "disaggregation.decode.gpus_per_replica",
        "8 GPUs a node is not a tensor-parallel size",
    ),
    (
        {
            "expert_parallel": {},
            "disaggregation": {"prefill": {"gpus_per_replica": 8}, "decode": {"gpus_per_replica": 8}},
        },
        "expert_parallel",
        "not allowed for meta-llama/Llama-3.1-70B-Instruct, a dense model",
    ),
    (
        {
            "expert_parallel": {"all_to_all": "deepepLowLatency"},
            "model_info": {"catalog": "deepseek-ai/DeepSeek-R1"},
        },
        "expert_parallel.all_to_all",
        "deepepLowLatency is refused",
    ),
    ({"disaggregation": None, "expert_parallel": {}}, "expert_parallel", "only allowed with disaggregation"),
    (
        {"disaggregation": None, "role_sizes": {"prefill": {"cpu": 4}}},
        "role_sizes",
        "only allowed with disaggregation",
    ),
    (
        {"gpu_nics": {"flavor": "RDMA", "networking": "multiNetwork"}},
        "disaggregation.prefill.gpus_per_replica",
        "2 takes 2 of a node's 8 GPUs, and on a multiNetwork pool",
    ),
]


@pytest.mark.parametrize(
    ("change", "path", "reason"), COMPONENT_REFUSED, ids=[c[1] for c in COMPONENT_REFUSED]
)
def test_the_component_alone_refuses_the_same_before_declaring_anything(
    change: dict[str, Any], path: str, reason: str
) -> None:
    args = {**ARGS, **change}
    args = {k: v for k, v in args.items() if v is not None}
    result = declare_alone(args)
    assert isinstance(result.error, InvalidArgsError), result.error
    assert any(p.path == path and p.reason.startswith(reason) for p in result.error.problems), (
        result.error.problems
    )
    assert [r.type for r in result.resources] == ["pulumi:providers:kubernetes"]


def test_the_component_alone_declares_the_roles_and_notes_tcp() -> None:
    result = declare_alone(ARGS)
    assert result.error is None, result.error
    names = {r.name for r in result.resources}
    assert {
        "chat-prefill-deployment",
        "chat-decode-deployment",
        "chat-rdma-2-claim",
        "chat-rdma-4-claim",
    } <= names
    spec = InferenceServiceSpec.model_validate(
        {**ARGS, "gpu_nics": None, "disaggregation": {**ARGS["disaggregation"], "kv_transport": "tcp"}},
        by_name=True,
    )
    assert any(n.startswith("note: disaggregation.kv_transport: tcp") for n in service_notes(spec))
