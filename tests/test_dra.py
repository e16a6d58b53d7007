"""NVIDIA's DRA driver (issue 28 items 2 and 4): its Helm chart pinned, our values checked against the
chart's own values.yaml at the pinned tag (vendored in tests/upstream/dra-driver-nvidia-gpu), and
pools whose GPUs the driver hands out through ResourceClaims instead of GKE's device plugin."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.dra.driver import NvidiaDraDriver
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    DRA_CLUSTER,
    DRA_POOL,
    L4_POOL,
    STANDARD_CLUSTER,
    config_error,
    render,
    stack_config,
)
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

UPSTREAM = Path(__file__).parent / "upstream" / "dra-driver-nvidia-gpu"
CHART_DEFAULTS = yaml.safe_load((UPSTREAM / "values.yaml").read_text(encoding="utf-8"))
# Values that are Kubernetes objects (checked against Kubernetes' own schema below), not chart keys.
KUBERNETES_VALUES = {"affinity", "tolerations"}
CHART = "kubernetes:helm.sh/v4:Chart"
CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
# GKE's managed DCGM needs GKE's driver: a DRA pool's driver is installed by the user.
NO_DCGM = {"dcgm": "none", "dashboard": False}


def unknown_values(ours: dict[str, Any], defaults: dict[str, Any], path: str = "") -> list[str]:
    """Our values the chart does not have, or whose type differs from the chart's default ('a.b')."""
    found: list[str] = []
    for key, value in ours.items():
        where = f"{path}{key}"
        if key not in defaults:
            found.append(f"{where}: not a value of the chart")
        elif key in KUBERNETES_VALUES:
            continue
        elif isinstance(defaults[key], dict) and defaults[key]:
            if not isinstance(value, dict):
                found.append(f"{where}: a map in the chart")
            else:
                found += unknown_values(value, defaults[key], f"{where}.")
        elif defaults[key] is not None and not isinstance(value, type(defaults[key])):
            found.append(f"{where}: {type(defaults[key]).__name__} in the chart")
    return found


def kubernetes_values(values: dict[str, Any], path: str = "") -> list[tuple[str, str, Any]]:
    """Every affinity and tolerations value, with where it is."""
    found = []
    for key, value in values.items():
        if key in KUBERNETES_VALUES:
            found.append((path, key, value))
        elif isinstance(value, dict):
            found += kubernetes_values(value, f"{path}{key}.")
    return found


def chart_values(result: RunResult) -> dict[str, Any]:
    return result.one(CHART, "dra-driver-chart").inputs["values"]


@pytest.fixture(scope="module")
def dra() -> RunResult:
    return render(
        stack_config(
            cluster=DRA_CLUSTER,
            gpuPools=[DRA_POOL, {"name": "t4", "accelerator": "nvidia-tesla-t4", "maxNodes": 1}],
            monitoring=NO_DCGM,
            workloads=[{"name": "nvidia-smi"}, {"name": "cuda-vector-add", "pool": "t4"}],
        )
    )


def test_the_chart_is_pinned_and_its_namespace_enforces_privileged(dra: RunResult) -> None:
    chart = dra.one(CHART, "dra-driver-chart").inputs
    assert (chart["chart"], chart["version"], chart["namespace"]) == (
        "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
        "0.4.0",
        "dra-driver-nvidia-gpu",
    )
    namespace = dra.one("kubernetes:core/v1:Namespace", "dra-driver-namespace").inputs["metadata"]
    assert namespace["name"] == "dra-driver-nvidia-gpu"
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    quota = dra.one("kubernetes:core/v1:ResourceQuota", "dra-driver-critical-pods").inputs
    assert quota["spec"]["scopeSelector"]["matchExpressions"] == [
        {
            "operator": "In",
            "scopeName": "PriorityClass",
            "values": ["system-node-critical", "system-cluster-critical"],
        }
    ]


def test_the_values_are_the_charts_own_keys(dra: RunResult) -> None:
    values = chart_values(dra)
    assert unknown_values(values, CHART_DEFAULTS) == []
    # The chart's templates/validation.yaml: GPU allocation only with the override, no `namespace`.
    assert values["resources"]["gpus"]["enabled"] is values["gpuResourcesEnabledOverride"] is True
    assert "namespace" not in values
    assert values["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"


def test_the_value_check_refuses_a_key_the_chart_does_not_have(dra: RunResult) -> None:
    values = copy.deepcopy(chart_values(dra))
    values["kubeletPlugin"]["tolerationz"] = []
    values["resources"]["gpus"]["enabled"] = "yes"
    assert unknown_values(values, CHART_DEFAULTS) == [
        "resources.gpus.enabled: bool in the chart",
        "kubeletPlugin.tolerationz: not a value of the chart",
    ]


def test_the_affinities_and_tolerations_are_valid_kubernetes(dra: RunResult) -> None:
    found = kubernetes_values(chart_values(dra))
    assert {f"{path}{key}" for path, key, _ in found} == {
        "controller.affinity",
        "kubeletPlugin.affinity",
        "kubeletPlugin.tolerations",
    }
    for _, key, value in found:
        pod = {"containers": [{"name": "c", "image": "i"}], key: value}
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod})


def test_the_kubelet_plugin_runs_on_the_dra_pools_only(dra: RunResult) -> None:
    plugin = chart_values(dra)["kubeletPlugin"]
    terms = plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["l4"]}]}
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in plugin["tolerations"]


def test_a_dra_pool_turns_gke_device_plugin_off_and_installs_no_driver(dra: RunResult) -> None:
    pools = {r.name: r.inputs for r in dra.of_type("gcp:container/nodePool:NodePool")}
    dra_config = pools["gpu-l4-pool"]["nodeConfig"]
    assert dra_config["labels"]["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    assert dra_config["labels"]["nvidia.com/gpu.present"] == "true"
    driver = dra_config["guestAccelerators"][0]["gpuDriverInstallationConfig"]["gpuDriverVersion"]
    assert driver == "INSTALLATION_DISABLED"
    assert "gke-no-default-nvidia-gpu-device-plugin" not in pools["gpu-t4-pool"]["nodeConfig"]["labels"]


def test_a_sample_on_a_dra_pool_claims_its_gpus_and_asks_no_device_plugin_gpu(dra: RunResult) -> None:
    templates = {r.inputs["metadata"]["name"]: r.inputs for r in dra.of_type(CLAIM_TEMPLATE)}
    # A sample Pod takes one GPU of its node (gpus_per_pod), so one template of one GPU.
    assert list(templates) == ["gpu"]
    request = templates["gpu"]["spec"]["spec"]["devices"]["requests"][0]
    assert request == {
        "name": "gpus",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1},
    }
    jobs = {r.inputs["metadata"]["name"]: r.inputs for r in dra.of_type("kubernetes:batch/v1:Job")}
    pod = jobs["nvidia-smi-l4"]["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "gpu"}]
    resources = pod["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "gpus"}]
    assert "nvidia.com/gpu" not in resources["limits"] and "nvidia.com/gpu" not in resources["requests"]
    # The pool beside it keeps GKE's device plugin.
    other = jobs["cuda-vector-add-t4"]["spec"]["template"]["spec"]
    assert "resourceClaims" not in other
    assert other["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_the_claim_template_is_valid_resource_k8s_io_v1(dra: RunResult) -> None:
    for resource in dra.of_type(CLAIM_TEMPLATE):
        validate({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", **resource.inputs})


def test_no_driver_without_a_rack_or_a_dra_pool() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1}],
            workloads=["nvidia-smi"],
        )
    )
    assert result.of_type(CHART) == [] and result.of_type(CLAIM_TEMPLATE) == []


def test_dra_gpus_are_refused_where_gke_refuses_them_each_under_its_key() -> None:
    pool = {
        **DRA_POOL,
        "driverVersion": "LATEST",
        "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2},
        "gpusPerNode": 1,
    }
    mig = {
        "name": "a100",
        "accelerator": "nvidia-tesla-a100",
        "maxNodes": 1,
        "draGpus": True,
        "driverVersion": "INSTALLATION_DISABLED",
        "migPartitionSize": "1g.5gb",
    }
    ladder = {**DRA_POOL, "name": "ladder", "capacityLadder": ["onDemand", "spot"]}
    message = config_error(
        {
            "cluster": {**STANDARD_CLUSTER, "minimumVersion": "1.33"},
            "gpuPools": [pool, mig, ladder],
            "monitoring": NO_DCGM,
        }
    )
    assert "gpuPools[0].sharing: not allowed with draGpus" in message
    assert "gpuPools[0].driverVersion: LATEST is not allowed with draGpus" in message
    assert "gpuPools[0].draGpus: draGpus needs GKE 1.34 or later" in message
    assert "gpuPools[1].migPartitionSize: not allowed with draGpus" in message
    assert "gpuPools[2].capacityLadder: not allowed with draGpus" in message


def test_dra_gpus_are_refused_on_autopilot() -> None:
    pool = {"name": "l4", "accelerator": "nvidia-l4", "draGpus": True}
    message = config_error({"cluster": AUTOPILOT_CLUSTER, "gpuPools": [pool]})
    assert "gpuPools[0].draGpus: not allowed on Autopilot: Autopilot clusters don't support DRA" in message


def test_the_driver_component_checks_its_args() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        NvidiaDraDriver.check_args("dra", {"node_pools": ["a", "a"]})
    text = str(refused.value)
    assert "compute_domains: false with gpus false leaves the driver nothing to do" in text
    assert "node_pools: lists a node pool twice" in text
    with pytest.raises(InvalidArgsError, match="node_pools: required"):
        NvidiaDraDriver.check_args("dra", {"gpus": True})
    spec = NvidiaDraDriver.check_args("dra", {"gpus": True, "node_pools": ["l4"]})
    assert (spec.gpus, spec.compute_domains) == (True, False)


def test_the_vendored_values_are_the_published_file_unchanged() -> None:
    data = (UPSTREAM / "values.yaml").read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert blob == "89885f77035d666ca83553a2a7d475f189a9ce0d", "re-vendor verbatim and update SOURCES.md"


def test_the_policy_pack_passes_the_dra_render_and_catches_a_gpu_limit(dra: RunResult) -> None:
    from tools import check_policies, plan

    document = plan.to_document(dra)
    report = check_policies.report(document)
    assert report["passed"] and report["violations"] == [], report["summary"]
    # The same render with the sample asking for nvidia.com/gpu on the DRA pool: refused.
    for resource in document["resources"]:
        if (
            resource["type"] == "kubernetes:batch/v1:Job"
            and resource["inputs"]["metadata"]["name"] == "nvidia-smi-l4"
        ):
            resource["inputs"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][
                "nvidia.com/gpu"
            ] = "1"
    report = check_policies.report(document)
    assert not report["passed"]
    assert any("dra-pool-gpu-claims" in str(v) for v in report["violations"])


@pytest.fixture(scope="module")
def dra_nccl() -> RunResult:
    return render(
        stack_config(
            cluster=DRA_CLUSTER,
            gpuPools=[DRA_POOL],
            monitoring=NO_DCGM,
            batch={"kueue": True},
            workloads=[{"name": "nccl-allreduce"}],
        )
    )


def nccl_pod(result: RunResult) -> dict[str, Any]:
    jobset = result.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "nccl-l4-jobset").inputs
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_the_all_reduce_on_a_dra_pool_claims_every_gpu_of_its_node(dra_nccl: RunResult) -> None:
    templates = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs
        for r in dra_nccl.of_type(CLAIM_TEMPLATE)
    }
    assert list(templates) == [("gpu-nccl-l4", "gpu-2")]
    request = templates[("gpu-nccl-l4", "gpu-2")]["spec"]["spec"]["devices"]["requests"][0]
    assert request == {
        "name": "gpus",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2},
    }
    pod = nccl_pod(dra_nccl)
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "gpu-2"}]
    # The health gate and the test share the Pod's claim; neither asks the device plugin.
    for container in [*pod["initContainers"], *pod["containers"]]:
        resources = container["resources"]
        assert resources["claims"] == [{"name": "gpus"}], container["name"]
        assert "nvidia.com/gpu" not in resources["limits"] and "nvidia.com/gpu" not in resources["requests"]
    health = {e["name"]: e["value"] for e in pod["initContainers"][0]["env"]}
    assert health["NVIDIA_SMI"] == "nvidia-smi" and health["NCCL_ALLREDUCE_GPUS"] == "2"


def test_kueue_counts_the_dra_pools_claimed_gpus_as_its_gpu_quota(dra_nccl: RunResult) -> None:
    # Kueue 0.19.2 never admits a Workload whose Pods claim an unmapped DeviceClass (pkg/dra/claims.go):
    # the JobSet above would wait in its queue for ever without this mapping.
    (kueue,) = [r for r in dra_nccl.of_type("kubernetes:helm.sh/v4:Chart") if r.name.endswith("-kueue")]
    configuration = yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration["resources"]["deviceClassMappings"] == [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}
    ]
    # The chart's own default otherwise (the integrations it lists, its leader election).
    assert "jobset.x-k8s.io/jobset" in configuration["integrations"]["frameworks"]
    assert configuration["leaderElection"]["leaderElect"] is True
    # Its quota resource is the one the pool's ClusterQueue covers.
    (queue,) = [
        r.inputs
        for r in dra_nccl.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
        if r.inputs["metadata"]["name"] == "gpu-l4"
    ]
    assert "nvidia.com/gpu" in queue["spec"]["resourceGroups"][0]["coveredResources"]


def test_a_stack_without_dra_pools_keeps_kueues_default_configuration() -> None:
    result = render(
        stack_config(**{"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "batch": {"kueue": True}})
    )
    (kueue,) = [r for r in result.of_type("kubernetes:helm.sh/v4:Chart") if r.name.endswith("-kueue")]
    assert not kueue.inputs.get("values")


def test_the_dra_all_reduce_objects_are_valid_kubernetes(dra_nccl: RunResult) -> None:
    for resource in dra_nccl.of_type(CLAIM_TEMPLATE):
        validate({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", **resource.inputs})
    pod = nccl_pod(dra_nccl)
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod})


def test_the_policy_pack_passes_the_dra_all_reduce(dra_nccl: RunResult) -> None:
    from tools import check_policies, plan

    document = plan.to_document(dra_nccl)
    report = check_policies.report(document)
    assert report["passed"] and report["violations"] == [], report["summary"]
    # The same JobSet asking for nvidia.com/gpu on the DRA pool: refused.
    for resource in document["resources"]:
        if resource["type"] == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet":
            job = resource["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]
            job["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    report = check_policies.report(document)
    assert not report["passed"]
    assert any("dra-pool-gpu-claims" in str(v) for v in report["violations"])
