"""The whole program, for each stack file and for shapes the stack files do not cover."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, render, stack_config, stack_render
from tools.offline import stacks

STACKS = stacks()


@pytest.fixture(scope="module", params=STACKS)
def stack_result(request):
    result = stack_render(request.param)
    assert result.error is None, f"{request.param}: {result.error}"
    return result


def test_every_stack_file_is_covered() -> None:
    assert {"dev", "prod"} <= set(STACKS)


def test_urns_are_unique(stack_result) -> None:
    counts = Counter(r.urn for r in stack_result.resources)
    assert [urn for urn, n in counts.items() if n > 1] == []


def test_every_resource_is_inside_a_component(stack_result) -> None:
    components = {r.urn for r in stack_result.resources if r.is_component}
    for r in stack_result.resources:
        if not r.is_component:
            assert r.parent in components, f"{r.name} is not parented to a component"


def test_exports(stack_result) -> None:
    outputs = stack_result.outputs
    # A stack whose GPUs are all DRA devices checks ResourceSlices instead; a fleet's manager has no GPU
    # to check (tests/test_first_hour.py).
    if outputs.get("gpuPools") != []:
        gpu_check = outputs["checks"].get("allocatableGpus") or outputs["checks"]["draResourceSlices"]
        assert "status.allocatable.nvidia" in gpu_check or "resourceslices" in gpu_check
    for key in ("monitoring", "sampleWorkloads"):
        assert key in outputs
    if outputs["clusterMode"] == "existing":
        assert outputs["flavor"] in ("gke", "generic")
        return
    for key in ("clusterName", "location", "endpoint", "dnsEndpoint", "kubeconfig", "gpuPools"):
        assert key in outputs
    assert outputs["kubeconfig"] == "[secret]"
    # The IP endpoint is private: kubectl comes in through the DNS endpoint.
    assert outputs["checks"]["getCredentials"].endswith("--dns-endpoint")
    for pool in outputs["gpuPools"]:
        assert pool["accelerator"].startswith("nvidia-")
        assert pool["zones"]


def test_dev_stack_is_cheap_autopilot_with_a_spot_l4_profile() -> None:
    result = stack_render("dev")
    cluster = result.one("gcp:container/cluster:Cluster").inputs
    assert cluster["enableAutopilot"] is True
    assert cluster["deletionProtection"] is False
    assert result.of_type("gcp:container/nodePool:NodePool") == []
    (profile,) = result.outputs["gpuPools"]
    assert profile["accelerator"] == "nvidia-l4"
    assert profile["spot"] is True
    compute_class = result.one("kubernetes:cloud.google.com/v1:ComputeClass").inputs
    assert [p["spot"] for p in compute_class["spec"]["priorities"]] == [True, False]
    assert {p["gpu"]["type"] for p in compute_class["spec"]["priorities"]} == {"nvidia-l4"}


def test_prod_stack_is_standard_private_protected_with_scale_to_zero_gpu_pools() -> None:
    result = stack_render("prod")
    cluster = result.one("gcp:container/cluster:Cluster").inputs
    assert cluster.get("enableAutopilot") is None
    assert cluster["deletionProtection"] is True
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    gpu_pools = [
        r.inputs for r in result.of_type("gcp:container/nodePool:NodePool") if r.name != "gke-system"
    ]
    by_name = {p["name"]: p for p in gpu_pools}
    assert by_name["l4-serving"]["nodeConfig"]["spot"] is False
    a100 = by_name["a100-mig"]["nodeConfig"]["guestAccelerators"][0]
    assert a100["type"] in ("nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb")
    assert a100.get("gpuPartitionSize") or a100.get("gpuSharingConfig")
    for p in gpu_pools:
        assert p["autoscaling"]["totalMinNodeCount"] == 0


def test_existing_network_is_used_without_creating_one() -> None:
    existing = {
        "network": "shared-vpc",
        "subnetwork": "gke-subnet",
        "podsRangeName": "p",
        "servicesRangeName": "s",
    }
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, network={"existing": existing}, gpuPools=[L4_POOL])
    )
    assert result.of_type("gcp:compute/network:Network") == []
    assert result.of_type("gke-gpu:index:GkeNetwork") == []
    cluster = result.one("gcp:container/cluster:Cluster").inputs
    assert cluster["network"] == "shared-vpc"
    assert cluster["subnetwork"] == "gke-subnet"
    assert cluster["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "p",
        "servicesSecondaryRangeName": "s",
    }


def test_public_nodes_get_no_nat() -> None:
    public = {
        **STANDARD_CLUSTER,
        "privateNodes": False,
        "publicEndpoint": True,
        "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24"}],
    }
    result = render(stack_config(cluster=public))
    assert result.of_type("gcp:compute/routerNat:RouterNat") == []


def test_gpu_pools_use_the_cluster_node_service_account() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL]), preview=False)
    pool = result.one("gcp:container/nodePool:NodePool", "gpu-l4-pool").inputs
    assert pool["nodeConfig"]["serviceAccount"] == "gpu-test-nodes@test-project.iam.gserviceaccount.com"
    assert pool["cluster"] == "gpu-test"


def test_autopilot_profiles_without_fallback_declare_nothing_in_kubernetes() -> None:
    pools = [{"name": "t4", "accelerator": "nvidia-tesla-t4", "spot": True, "onDemandFallback": False}]
    result = render(stack_config(cluster=AUTOPILOT_CLUSTER, gpuPools=pools))
    assert result.of_type("kubernetes:cloud.google.com/v1:ComputeClass") == []
    (profile,) = result.outputs["gpuPools"]
    assert profile["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
        "cloud.google.com/gke-spot": "true",
    }


def test_kubernetes_objects_use_the_cluster_provider() -> None:
    result = stack_render("dev")
    provider = result.one("pulumi:providers:kubernetes")
    for r in result.resources:
        if r.type.startswith("kubernetes:"):
            assert r.provider and r.provider.startswith(provider.urn), r.name


def test_the_dns_endpoint_is_known_after_apply_in_a_preview() -> None:
    from tools.offline import UNKNOWN

    assert stack_render("prod").outputs["dnsEndpoint"] == UNKNOWN
    assert stack_render("prod", preview=False).outputs["dnsEndpoint"].endswith(".us-central1.gke.goog")


ALERTING = {
    "alerts": {"enabled": True, "notificationChannels": ["projects/test-project/notificationChannels/1"]}
}


def _with_idle_minutes(valid, minutes):
    """Settings the stack rules never produce: alerts.idleGpuMinutes forced past them."""
    alerts = valid.monitoring.alerts.model_copy(update={"idle_gpu_minutes": minutes})
    return dataclasses.replace(valid, monitoring=valid.monitoring.model_copy(update={"alerts": alerts}))


def test_component_checks_run_before_anything_is_declared_and_are_keyed_by_the_stack_file():
    """A stack the stack rules accepted, with a component arg the component would refuse (here forced
    past the stack rules): check_components names the stack-file section, and nothing is declared.
    (GPU pools are not re-checked: the stack layer ran their rules and hands the checked pool over;
    tests/test_rules_once.py.)"""
    from gke_gpu.stack.config import ConfigError
    from gke_gpu.stack.program import check_components
    from tests.conftest import settings
    from tools.offline import run_program

    valid = settings({"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "monitoring": ALERTING})
    broken = _with_idle_minutes(valid, 3)
    check_components(valid)

    def program():
        check_components(broken)

    result = run_program({}, program=program)
    assert isinstance(result.error, ConfigError)
    assert result.error.problems == [
        "gke-gpu:monitoring: GpuMonitoring 'monitoring': "
        "alerts.idle_gpu_minutes: 3 is not allowed; must be >= 5"
    ]
    assert result.resources == []
    with pytest.raises(ConfigError):
        check_components(broken)


def test_main_checks_the_components_before_declaring(monkeypatch):
    import gke_gpu.stack.config
    from gke_gpu.stack.config import ConfigError
    from tests.conftest import settings
    from tools.offline import run_program

    valid = settings({"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "monitoring": ALERTING})
    monkeypatch.setattr(gke_gpu.stack.config, "load_settings", lambda: _with_idle_minutes(valid, 2))
    result = run_program(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring=ALERTING))
    assert isinstance(result.error, ConfigError), result.error
    assert result.error.problems == [
        "gke-gpu:monitoring: GpuMonitoring 'monitoring': "
        "alerts.idle_gpu_minutes: 2 is not allowed; must be >= 5"
    ]
    assert result.resources == []
