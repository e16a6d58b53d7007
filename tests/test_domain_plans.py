"""Each domain's plan is a pure function of its resolved sections (docs/architecture.md, "One
contract"): tested here as functions, with no render and no mocks."""

from __future__ import annotations

from typing import Any

from gke_gpu.cluster.plan import ClusterFeatures, NetworkRefs, hpa_profile, plan_cluster
from gke_gpu.core.validation import UNKNOWN, ArgsModel, Deferrable, with_outputs
from gke_gpu.dra.plan import dra_checks, driver_args, needs_dra_driver
from gke_gpu.gpu.existing_plan import plan_existing
from gke_gpu.gpu.plan import (
    attached_networks,
    declares_compute_class,
    gpu_checks,
    ladder_images,
    pool_kind,
)
from gke_gpu.gpudirect.plan import AdmissionScope, plan_gpudirect
from gke_gpu.monitoring.plan import MonitoredCluster, existing_exporter, monitoring_args
from gke_gpu.network.plan import existing_refs, vpc_args
from gke_gpu.workloads.batch_plan import admission_scope, plan_batch
from gke_gpu.workloads.samples_plan import existing_target, samples_args
from tests.conftest import AUTOPILOT_CLUSTER, STANDARD_CLUSTER, settings

L4 = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2}
H100_RDMA = {
    "name": "h200",
    "accelerator": "nvidia-h200-141gb",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "gpudirect": True,
    "zones": ["us-central1-b"],
}
REFS = NetworkRefs("vpc", "subnet", "pods", "services")


def _settings(**raw: Any) -> Any:
    return settings({"cluster": STANDARD_CLUSTER, **raw})


def test_the_cluster_plan_turns_what_others_ask_into_its_args() -> None:
    s = _settings(gpuPools=[L4])
    plain = plan_cluster(s.cluster, project="p-123456", stack="dev", features=ClusterFeatures())
    asked = plan_cluster(
        s.cluster,
        project="p-123456",
        stack="Dev Stack",
        features=ClusterFeatures(serving=True, gcs_fuse=True, bare_metal=True, multi_networking=True),
    )
    args = asked.cluster_args(REFS, labels={"fleet": "f"})
    assert "hpa_profile" not in plain.cluster_args(REFS)
    assert args["hpa_profile"] == "performance" == hpa_profile(s.cluster, serving=True)
    assert args["gcs_fuse_csi_driver"] and args["multi_networking"] and args["shielded_nodes"] is False
    assert args["resource_labels"] == {"managed-by": "pulumi", "pulumi-stack": "dev-stack", "fleet": "f"}
    assert args["network"] == "vpc" and args["services_range_name"] == "services"
    assert asked.get_credentials().startswith("gcloud container clusters get-credentials gpu-test ")


def test_the_network_plan_is_a_vpc_or_an_existing_ones_names() -> None:
    created = _settings(gpuPools=[L4]).network
    existing = _settings(
        network={
            "existing": {
                "network": "my-vpc",
                "subnetwork": "my-subnet",
                "podsRangeName": "pods",
                "servicesRangeName": "svc",
            }
        }
    ).network
    args = vpc_args(created, project="p-123456", region="us-central1", name_prefix="gpu-test", cloud_nat=True)
    assert args is not None and args["cloud_nat"] and "proxy_only_cidr" not in args
    assert vpc_args(existing, project="p", region="r", name_prefix="n", cloud_nat=False) is None
    assert existing_refs(existing) == NetworkRefs("my-vpc", "my-subnet", "pods", "svc")


def test_the_pools_plan_says_what_each_pool_is_and_how_to_see_its_gpus() -> None:
    pools = _settings(gpuPools=[L4]).gpu_pools
    autopilot = settings(
        {"cluster": AUTOPILOT_CLUSTER, "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4"}]}
    )
    assert pool_kind(pools[0], autopilot=False) == "node-pool"
    assert pool_kind(autopilot.gpu_pools[0], autopilot=True) == "autopilot-profile"
    assert ladder_images(pools, autopilot=False) == []
    checks = gpu_checks(pools, {"draDriverPods": "kubectl get pods -n x"})
    assert list(checks) == ["allocatableGpus", "devicePluginPods", "draDriverPods", "gpuNodeEvents"]


def test_the_pools_plan_says_which_networks_a_pool_attaches_and_which_profiles_are_compute_classes() -> None:
    g4 = {"name": "g4", "accelerator": "nvidia-rtx-pro-6000", "gpusPerNode": 8, "maxNodes": 2}
    plain, rdma, second = _settings(gpuPools=[L4, H100_RDMA, {**g4, "secondNetwork": True}]).gpu_pools
    assert [attached_networks(p) for p in (plain, rdma, second)] == [None, "gpudirect", "second"]
    profiles = settings(
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [
                {"name": "l4", "accelerator": "nvidia-l4", "spot": True, "onDemandFallback": True},
                {"name": "t4", "accelerator": "nvidia-tesla-t4", "spot": True, "onDemandFallback": False},
            ],
        }
    ).gpu_pools
    assert [declares_compute_class(p, autopilot=True) for p in profiles] == [True, False]
    assert not declares_compute_class(plain, autopilot=False)


def test_the_dra_plan_is_nothing_without_a_rack_or_dra_gpus() -> None:
    pools = _settings(gpuPools=[L4]).gpu_pools
    assert not needs_dra_driver(pools, standard=True)
    assert driver_args(pools, standard=True) is None
    assert dra_checks(pools, standard=True) == {}


def _gpudirect(pool: dict[str, Any]) -> tuple[Any, Any]:
    s = _settings(gpuPools=[pool])
    plan = plan_gpudirect(
        s.gpu_pools,
        s.network,
        project="p-123456",
        region="us-central1",
        cluster_name="gpu-test",
        image_digests={},
    )
    return s, plan


def test_the_gpudirect_plan_gives_an_rdma_flavour_its_vpcs_in_its_zone() -> None:
    s, plan = _gpudirect(H100_RDMA)
    ((flavor, args),) = plan.networks.items()
    assert args["zone"] == "us-central1-b" and args["cidr"] == s.network.gpudirect_cidr
    software = plan.software({flavor: "node-networks"})
    assert software[flavor]["node_pools"] == ["h200"]
    # RDMA has no device injector: its policies confine only the namespaces the teams' plan gives.
    assert plan.admission(AdmissionScope([], [], {}, None)) is None
    confined = plan.admission(AdmissionScope(["gpudirect-vision"], [], {}, None))
    assert confined is not None and confined["namespaces"] == ["gpudirect-vision"]
    assert plan.output()[str(flavor)]["pools"] == ["h200"]


def test_the_gpudirect_plan_of_plain_pools_is_empty() -> None:
    _, plan = _gpudirect(L4)
    assert plan.networks == {} and plan.second_network is None and plan.output() == {}
    assert plan.admission(AdmissionScope([], [], {}, None)) is None


def test_the_batch_plan_queues_each_pool_and_confines_gpudirect_teams() -> None:
    teams = [{"name": "vision", "pools": {"h200": {"gpus": 8}}}]
    s = _settings(gpuPools=[H100_RDMA], batch={"kueue": True, "teams": teams})
    plan = plan_batch(s.batch, s.gpu_pools, s.workloads, local_queue_namespace=None)
    assert [q["name"] for q in plan.args["queues"]] == ["h200"]
    assert plan.summary[0]["teams"][0]["team"] == "vision"
    scope = admission_scope(s.gpu_pools, s.workloads, s.batch)
    assert scope.namespaces == ["gpudirect-vision", "vision"]


def test_the_monitoring_plan_declares_nothing_it_has_no_use_for() -> None:
    s = _settings(gpuPools=[L4], monitoring={"dcgm": "none", "dashboard": False})
    assert monitoring_args(s.monitoring, MonitoredCluster("p-123456", "gpu-test"), None) is None


def test_an_existing_generic_clusters_gpu_layer_is_planned_from_its_device_plugin() -> None:
    s = settings(
        {
            "cluster": {
                "mode": "existing",
                "flavor": "generic",
                "kubeconfig": "apiVersion: v1\ncontexts: [{name: c}]",
            },
            "gpuNodes": ["node-1"],
            "devicePlugin": {"gpuNodeLabel": "gpus=true", "sharing": {"timeSlicing": {"replicas": 4}}},
        }
    )
    gpu = plan_existing(s.device_plugin, s.gpu_nodes, {})
    assert gpu.labels == {"nodes": ["node-1"], "label_key": "gpus", "label_value": "true", "taint": True}
    assert gpu.selector_output() == {"gpus": "true"}
    assert existing_target(gpu)["shared_clients"] == 4
    assert existing_exporter(s.monitoring, gpu)["node_selector"] == {"gpus": "true"}
    assert samples_args((), {}) is None


class _Spec(ArgsModel):
    name: Deferrable[str]
    names: list[Deferrable[str]]


def test_the_checked_args_get_the_callers_outputs_back() -> None:
    """One checked form of the args: where the check saw an Output as UNKNOWN, the spec holds the
    Output itself (core/validation.py with_outputs), so a component reads its spec only."""
    output = object()  # an Output: with_outputs puts back whatever the caller gave
    checked = _Spec.model_validate({"name": UNKNOWN, "names": ["a", UNKNOWN]})
    restored = with_outputs(checked, {"name": output, "names": ["a", output]})
    assert restored.name is output and restored.names == ["a", output]
    assert with_outputs(checked, {"name": UNKNOWN, "names": ["a", UNKNOWN]}) is checked
