"""Model servers on a `draGpus` pool (issue 28 item 4): the Deployment's and the LeaderWorkerSet's Pods
claim their GPUs through a ResourceClaimTemplate of the DeviceClass gpu.nvidia.com in the service's
namespace (`resource.k8s.io/v1`), with no `nvidia.com/gpu` limit; the autoscaler and the disruption
budget are as on any pool; the policy pack's `dra-pool-gpu-claims` passes, and catches a limit."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from tests.conftest import DRA_CLUSTER, config_error, render, stack_config
from tests.conftest import DRA_POOL as DRA_SHARED_POOL
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
# Two L4 GPUs a node (g2-standard-24), GKE's driver off as GKE's DRA page asks.
DRA_POOL = {**DRA_SHARED_POOL, "maxNodes": 6}
NO_DCGM = {"dcgm": "none", "dashboard": False}
MODEL = "gs://models-bucket/qwen2.5-1.5b-instruct"
# One node a replica, autoscaled (a Deployment, its HPA and PDB); a replica over two nodes (an LWS).
CHAT = {"name": "chat", "pool": "l4", "model": MODEL, "gpusPerReplica": 2, "replicas": {"min": 2, "max": 2}}
BIG = {"name": "big", "pool": "l4", "model": MODEL, "gpusPerReplica": 4}
GPU_REQUEST = {
    "name": "gpus",
    "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2},
}


@pytest.fixture(scope="module")
def served() -> RunResult:
    chat = {**CHAT, "replicas": {"min": 2, "max": 3}}
    return render(
        stack_config(cluster=DRA_CLUSTER, gpuPools=[DRA_POOL], monitoring=NO_DCGM, serving=[chat, BIG])
    )


def templates(result: RunResult) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs
        for r in result.of_type(CLAIM_TEMPLATE)
    }


def server_pods(result: RunResult) -> dict[str, dict[str, Any]]:
    """Every server Pod spec: the Deployment's, the LeaderWorkerSet's leader and worker."""
    deployment = result.one(DEPLOYMENT, "serve-chat-deployment").inputs
    group = result.one(LWS).inputs["spec"]["leaderWorkerTemplate"]
    return {
        "chat": deployment["spec"]["template"]["spec"],
        "big leader": group["leaderTemplate"]["spec"],
        "big worker": group["workerTemplate"]["spec"],
    }


def test_each_service_claims_its_pods_gpus_through_a_template_in_its_namespace(served: RunResult) -> None:
    found = templates(served)
    # A Pod's GPUs: the replica's two (chat), a node's two of the four (big, two nodes a replica).
    assert sorted(found) == [("serve-big", "gpu-2"), ("serve-chat", "gpu-2")]
    for template in found.values():
        assert template["spec"]["spec"]["devices"]["requests"] == [GPU_REQUEST]
    for where, pod in server_pods(served).items():
        assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "gpu-2"}], where
        (container,) = pod["containers"]
        resources = container["resources"]
        assert resources["claims"] == [{"name": "gpus"}], where
        assert "nvidia.com/gpu" not in resources["limits"], where
        assert "nvidia.com/gpu" not in resources["requests"], where
        # Everything else of the Pod is as on any pool: its node selector and the GPU taint's toleration.
        assert pod["nodeSelector"]["cloud.google.com/gke-nodepool"] == "l4", where
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert f"--tensor-parallel-size={2}" in container["args"], where


def test_the_autoscaler_and_the_disruption_budget_still_hold(served: RunResult) -> None:
    (hpa,) = served.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
    assert (hpa.inputs["spec"]["minReplicas"], hpa.inputs["spec"]["maxReplicas"]) == (2, 3)
    assert hpa.inputs["spec"]["scaleTargetRef"]["name"] == "chat"
    budgets = {
        r.inputs["metadata"]["namespace"] for r in served.of_type("kubernetes:policy/v1:PodDisruptionBudget")
    }
    assert "serve-chat" in budgets


def test_every_dra_serving_manifest_is_valid(served: RunResult) -> None:
    for resource in served.of_type(CLAIM_TEMPLATE):
        validate({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", **resource.inputs})
    for where, pod in server_pods(served).items():
        validate(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": where.replace(" ", "-")}, "spec": pod}
        )
    validate(served.one(DEPLOYMENT, "serve-chat-deployment").inputs)


def test_the_policy_pack_passes_dra_serving_and_catches_a_gpu_limit(served: RunResult) -> None:
    from tools import check_policies, plan

    document = plan.to_document(served)
    report = check_policies.report(document)
    assert report["passed"] and report["violations"] == [], report["summary"]
    for kind, path in (
        (DEPLOYMENT, ("spec", "template", "spec")),
        (LWS, ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")),
    ):
        broken = copy.deepcopy(document)
        for resource in broken["resources"]:
            if resource["type"] == kind:
                pod = resource["inputs"]
                for key in path:
                    pod = pod[key]
                pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
        report = check_policies.report(broken)
        assert not report["passed"], kind
        assert any("dra-pool-gpu-claims" in str(v) for v in report["violations"]), kind


def test_a_pool_beside_keeps_the_device_plugins_gpu_limit() -> None:
    l4 = {"name": "t4", "accelerator": "nvidia-tesla-t4", "maxNodes": 1, "driverVersion": "LATEST"}
    chat = {"name": "chat", "pool": "t4", "model": MODEL}
    result = render(
        stack_config(cluster=DRA_CLUSTER, gpuPools=[DRA_POOL, l4], monitoring=NO_DCGM, serving=[chat])
    )
    pod = result.one(DEPLOYMENT, "serve-chat-deployment").inputs["spec"]["template"]["spec"]
    assert "resourceClaims" not in pod
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert result.of_type(CLAIM_TEMPLATE) == []


def test_scaling_on_gpu_duty_cycle_is_refused_on_a_dra_pool() -> None:
    chat = {**CHAT, "replicas": {"min": 1, "max": 2}, "scaleOn": "gpu"}
    message = config_error(
        {"cluster": DRA_CLUSTER, "gpuPools": [DRA_POOL], "monitoring": NO_DCGM, "serving": [chat]}
    )
    assert "serving[0].scaleOn: gpu is not allowed on pool l4, a draGpus pool" in message
    assert "use queue" in message


ARGS = {
    "model": MODEL,
    "node_selector": {"cloud.google.com/gke-nodepool": "l4"},
    "tolerations": [],
    "project": "p-123456",
    "cluster_name": "gpu",
}


def test_the_component_takes_dra_gpus_and_refuses_it_with_scale_on_gpu() -> None:
    spec = InferenceService.check_args("chat", {**ARGS, "dra_gpus": True, "gpus_per_replica": 2})
    assert spec.dra_gpus is True
    with pytest.raises(InvalidArgsError, match="scale_on: gpu is not allowed with dra_gpus"):
        InferenceService.check_args("chat", {**ARGS, "dra_gpus": True, "max_replicas": 2, "scale_on": "gpu"})
