"""The ComputeClass of an Autopilot Spot profile with an on-demand fallback: GKE's published CRD
schema (vendored verbatim, see tests/schemas/SOURCES.md) accepts it, time-sharing and MIG ride in
both priorities as gpu.gpuSharing, and its Pods select the class and nothing that contradicts it."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gke_gpu.gpu.compute_class import GPU_SHARING_MIN_VERSION, GpuComputeClass, compute_class_args
from gke_gpu.stack.config import parse_settings
from tests.conftest import AUTOPILOT_CLUSTER, render, settings, stack_config
from tests.kubernetes_schemas import CRD_SCHEMAS, SCHEMAS, validate
from tests.test_components import declare
from tools.offline import run_program

KIND = "kubernetes:cloud.google.com/v1:ComputeClass"
VENDORED, OURS = CRD_SCHEMAS[("cloud.google.com/v1", "ComputeClass")]
# Git blob id of cloud.google.com/computeclass_v1.json at datreeio/CRDs-catalog 77e49833 (2026-08-02).
VENDORED_BLOB = "a9a7087f18583c4531a3a8fe32b6a26adb3c907c"
TIME_SHARED_L4 = {
    "name": "l4",
    "accelerator": "nvidia-l4",
    "spot": True,
    "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 3},
}
MIG_H100 = {"name": "h100", "accelerator": "nvidia-h100-80gb", "spot": True, "migPartitionSize": "1g.10gb"}


def crd() -> dict[str, Any]:
    return json.loads((SCHEMAS / VENDORED).read_text())


def profile(pool: dict[str, Any]):
    (value,) = settings({"cluster": AUTOPILOT_CLUSTER, "gpuPools": [pool]}).gpu_pools
    return value


def compute_class_spec(pool: dict[str, Any]) -> dict[str, Any]:
    result = declare(
        lambda opts: GpuComputeClass("cc", compute_class_args(profile(pool), region="us-central1"), opts=opts)
    )
    return result.one(KIND).inputs["spec"]


def test_vendored_crd_is_the_published_file_unchanged() -> None:
    data = (SCHEMAS / VENDORED).read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert blob == VENDORED_BLOB, "re-vendor verbatim and update SOURCES.md and VENDORED_BLOB"


def test_vendored_crd_defines_gpu_sharing() -> None:
    gpu = crd()["properties"]["spec"]["properties"]["priorities"]["items"]["properties"]["gpu"]
    sharing = gpu["properties"]["gpuSharing"]
    assert set(sharing["properties"]) == {"gpuPartitionSize", "maxSharedClientsPerGPU", "sharingStrategy"}
    assert sharing["properties"]["sharingStrategy"]["enum"] == ["MPS", "TIME_SHARING"]
    assert sharing["properties"]["gpuPartitionSize"]["type"] == "string"
    assert sharing["additionalProperties"] is False


def test_no_cel_rule_of_the_crd_concerns_the_gpu() -> None:
    """jsonschema does not evaluate x-kubernetes-validations (CEL); none may touch what we set."""
    rules: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(v["rule"] for v in node.get("x-kubernetes-validations", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(crd()["properties"]["spec"]["properties"]["priorities"])
    assert rules, "the CRD's priority rules moved: check this test still looks at them"
    assert [r for r in rules if "gpu" in r.lower()] == []


@pytest.mark.parametrize(
    ("pool", "sharing"),
    [
        (TIME_SHARED_L4, {"sharingStrategy": "TIME_SHARING", "maxSharedClientsPerGPU": 3}),
        (MIG_H100, {"gpuPartitionSize": "1g.10gb"}),
        (
            {**MIG_H100, "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2}},
            {"sharingStrategy": "TIME_SHARING", "maxSharedClientsPerGPU": 2, "gpuPartitionSize": "1g.10gb"},
        ),
    ],
    ids=["time-sharing", "mig", "mig-and-time-sharing"],
)
def test_both_priorities_carry_gpu_sharing(pool: dict[str, Any], sharing: dict[str, Any]) -> None:
    spec = compute_class_spec(pool)  # declare() validates it against the vendored CRD and ours
    assert [p["spot"] for p in spec["priorities"]] == [True, False]
    for priority in spec["priorities"]:
        assert priority["gpu"]["type"] == pool["accelerator"]
        assert priority["gpu"]["gpuSharing"] == sharing


def test_profile_without_sharing_has_no_gpu_sharing() -> None:
    spec = compute_class_spec({"name": "l4", "accelerator": "nvidia-l4", "spot": True})
    assert all("gpuSharing" not in p["gpu"] for p in spec["priorities"])


def _class_object(gpu_sharing: dict[str, Any]) -> dict[str, Any]:
    gpu = {"type": "nvidia-l4", "count": 1, "driverVersion": "default", "gpuSharing": gpu_sharing}
    return {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": "gpu-l4"},
        "spec": {
            "priorities": [{"gpu": gpu, "spot": True}, {"gpu": copy.deepcopy(gpu), "spot": False}],
            "nodePoolAutoCreation": {"enabled": True},
            "whenUnsatisfiable": "DoNotScaleUp",
        },
    }


@pytest.mark.parametrize(
    ("gpu_sharing", "schema", "message"),
    [
        ({"sharingStrategy": "time-sharing", "maxSharedClientsPerGPU": 2}, VENDORED, "is not one of"),
        ({"sharingStrategy": "MPS", "maxClients": 2}, VENDORED, "Additional properties"),
        ({"sharingStrategy": "TIME_SHARING"}, OURS, "dependency"),
        ({"sharingStrategy": "TIME_SHARING", "maxSharedClientsPerGPU": 49}, OURS, "maximum"),
        ({}, OURS, "should be non-empty"),
        ({"gpuPartitionSize": "1g"}, OURS, "does not match"),
    ],
    ids=["label-value-strategy", "unknown-field", "strategy-alone", "too-many-clients", "empty", "bad-mig"],
)
def test_bad_gpu_sharing_is_refused(gpu_sharing: dict[str, Any], schema: str, message: str) -> None:
    with pytest.raises(AssertionError) as info:
        validate(_class_object(gpu_sharing))
    assert f"({schema})" in str(info.value)
    assert message in str(info.value)


def test_good_gpu_sharing_object_is_valid() -> None:
    validate(_class_object({"sharingStrategy": "TIME_SHARING", "maxSharedClientsPerGPU": 2}))


def test_spot_sharing_and_mig_profiles_fall_back_to_on_demand_by_default() -> None:
    for pool in (TIME_SHARED_L4, MIG_H100):
        assert profile(pool).on_demand_fallback is True
        assert profile({**pool, "onDemandFallback": True}).on_demand_fallback is True
        assert profile({**pool, "onDemandFallback": False}).on_demand_fallback is False
        assert profile({**pool, "spot": False}).on_demand_fallback is False


def test_a_shared_fallback_notes_the_gke_version_it_needs() -> None:
    raw = {"cluster": AUTOPILOT_CLUSTER, "gpuPools": [TIME_SHARED_L4]}
    _, warnings = parse_settings(raw, project="test-project", region="us-central1", stack="t")
    assert any("gpuPools[0]" in w and GPU_SHARING_MIN_VERSION in w for w in warnings), warnings
    raw = {"cluster": AUTOPILOT_CLUSTER, "gpuPools": [{**TIME_SHARED_L4, "onDemandFallback": False}]}
    _, warnings = parse_settings(raw, project="test-project", region="us-central1", stack="t")
    assert not any(GPU_SHARING_MIN_VERSION in w for w in warnings)


def test_time_shared_spot_profile_renders_a_compute_class_its_pods_select() -> None:
    result = render(
        stack_config(
            cluster=AUTOPILOT_CLUSTER,
            gpuPools=[TIME_SHARED_L4],
            workloads=[{"name": "sharing-demo", "replicas": 3}],
        )
    )
    spec = result.one(KIND).inputs["spec"]
    assert [p["spot"] for p in spec["priorities"]] == [True, False]
    for priority in spec["priorities"]:
        assert priority["gpu"] == {
            "type": "nvidia-l4",
            "count": 1,
            "driverVersion": "default",
            "gpuSharing": {"sharingStrategy": "TIME_SHARING", "maxSharedClientsPerGPU": 3},
        }
    (summary,) = result.outputs["gpuPools"]
    assert summary["onDemandFallback"] is True
    # The class carries accelerator, Spot and sharing: a Pod that also selected Spot or a sharing
    # label would contradict the on-demand priority, so it selects the class alone.
    assert summary["nodeSelector"] == {"cloud.google.com/compute-class": "gpu-l4"}
    assert summary["gpusPerPod"] == 1, "one time-shared GPU per Pod"
    (demo,) = [
        r.inputs
        for r in result.resources
        if r.type in ("kubernetes:batch/v1:Job", "kubernetes:apps/v1:Deployment")
        and r.inputs["metadata"]["name"] == "sharing-demo-l4"
    ]
    pod = demo["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/compute-class": "gpu-l4"}
    assert {
        "key": "cloud.google.com/compute-class",
        "operator": "Equal",
        "value": "gpu-l4",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


# -- the component as a library user declares it -------------------------------------------------


def _declared(args: dict[str, Any]):
    def program():
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        GpuComputeClass("l4", args, opts=pulumi.ResourceOptions(provider=provider))

    return run_program({}, program=program)


def test_library_args_need_only_the_accelerator_and_the_count() -> None:
    result = declare(
        lambda opts: GpuComputeClass("l4", {"accelerator": "nvidia-l4", "gpus_per_node": 1.0}, opts=opts)
    )
    cc = result.one(KIND).inputs
    assert cc["metadata"]["name"] == "gpu-l4"
    assert [p["spot"] for p in cc["spec"]["priorities"]] == [True, False]
    assert cc["spec"]["priorities"][0]["gpu"] == {"type": "nvidia-l4", "count": 1, "driverVersion": "default"}


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (
            {"sharing": {"strategy": "MPS", "max_clients_per_gpu": 4}},
            "sharing.strategy: 'MPS' is not allowed on Autopilot",
        ),
        ({"zones": ["us-central1-a"]}, "zones: unknown key; allowed keys here: accelerator, driver_version"),
        ({"accelerator": "nvidia-tesla-p4"}, "accelerator: 'nvidia-tesla-p4' is not offered on Autopilot"),
        ({"gpus_per_node": 3}, "gpus_per_node: 3 is not offered for nvidia-l4 on Autopilot"),
        (
            {"driver_version": "INSTALLATION_DISABLED"},
            "driver_version: 'INSTALLATION_DISABLED' is not allowed on Autopilot",
        ),
        ({"region": "us-centrall1"}, "region: 'us-centrall1' is not a Compute Engine region"),
        ({"colour": "red"}, "colour: unknown key"),
    ],
)
def test_bad_library_args_are_refused_by_name_before_anything_is_declared(
    bad: dict[str, Any], expected: str
) -> None:
    from gke_gpu.core.validation import InvalidArgsError

    result = _declared({"accelerator": "nvidia-l4", "gpus_per_node": 1, **bad})
    assert isinstance(result.error, InvalidArgsError), result.error
    assert any(p.startswith(expected) for p in result.error.problems), result.error.problems
    assert not [r for r in result.resources if r.type.startswith("gke-gpu:") or r.type == KIND]
