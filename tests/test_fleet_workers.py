"""A fleet worker declares what a single-cluster stack of its settings declares (issue 29 item 1): a
GPUDirect pool's VPCs, node software and admission policies, the DRA driver of its `draGpus` pools and
Kueue's mapping of their claims, its teams' training data and its GPU monitoring, each on the worker's
own Kubernetes provider and named after the worker; what a worker still does not take is refused by
name."""

from typing import Any

import pytest
import yaml

from gke_gpu.core.image_digests import repository
from gke_gpu.gpu.node_pool import workload_policy_name
from gke_gpu.gpudirect.images import TCPX_PLUGIN, TCPXO_PLUGIN
from gke_gpu.workloads.training_data import data_service_account_id
from tests.conftest import DRA_L4_POOL, render
from tests.test_fleet import errors, fleet_config, fleet_raw, provider_of
from tools.offline import RunResult

KUEUE_CHART = "kubernetes:helm.sh/v4:Chart"


def _full_fleet() -> dict[str, Any]:
    """The example with us-east's pool `mega` on A3 Mega GPUDirect (TCPXO, flex-start with queued
    provisioning) and its all-reduce test, a fleet queue of its own, and us-central with an L4 `draGpus`
    pool (the worker's own queue only), team research's training data, a sample and its own monitoring."""
    raw = fleet_raw()
    east, central = raw["fleet"]["workers"]
    east["gpuPools"][0].update(name="mega", accelerator="nvidia-h100-mega-80gb", gpudirect=True)
    for team in east["batch"]["teams"]:
        team["pools"] = {"mega": team["pools"]["h100"]}
    east["network"]["gpudirectCidr"] = "192.168.0.0/16"
    # The fabric's proof: a 2-node all-reduce over GPUDirect, queued by the worker's own Kueue.
    east["workloads"] = [{"name": "nccl-allreduce", "pool": "mega", "nodes": 2}]
    central["workloads"] = [{"name": "nvidia-smi", "pool": "l4"}]
    central["cluster"]["minimumVersion"] = "1.34"
    central["gpuPools"].append(dict(DRA_L4_POOL))
    # GKE's managed DCGM needs GKE-installed drivers, which a DRA pool does not have.
    central["monitoring"] = {"dcgm": "none", "dashboard": False}
    central["batch"]["teams"][0]["data"] = [{"name": "training", "gcs": {"bucket": "research-training-data"}}]
    raw["fleet"]["teams"] = [
        {"name": "research", "queues": [{"pool": "h100"}, {"pool": "mega"}]},
        {"name": "platform", "queues": [{"pool": "h100"}, {"pool": "mega"}]},
    ]
    return raw


@pytest.fixture(scope="module")
def full() -> RunResult:
    return render(fleet_config(_full_fleet()))


def _on(result: RunResult, worker: str) -> list[Any]:
    """The resources declared through the worker's Kubernetes provider."""
    urn = provider_of(result, f"{worker}-gke")
    return [r for r in result.resources if (r.provider or "").startswith(urn)]


def _under(result: RunResult, component: str) -> list[Any]:
    """Every resource whose parent chain reaches the component of that name."""
    by_urn = {r.urn: r for r in result.resources}
    (root,) = [r for r in result.resources if r.name == component and not r.custom]
    found = []
    for r in result.resources:
        parent = r.parent
        while parent and parent in by_urn:
            if parent == root.urn:
                found.append(r)
                break
            parent = by_urn[parent].parent
    return found


def test_a_gpudirect_worker_gets_its_networks_software_and_admission(full: RunResult) -> None:
    # The VPCs of the GPU NICs, named after the worker's cluster, and its pool attached to them.
    vpcs = [r for r in _under(full, "us-east-gpudirect-tcpxo") if r.type == "gcp:compute/network:Network"]
    assert len(vpcs) == 8
    assert all(r.inputs["name"].startswith("gpu-fleet-us-east-") for r in vpcs)
    pool = full.one("gcp:container/nodePool:NodePool", "us-east-gpu-mega-pool")
    assert len(pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 8
    clusters = {r.name: r.inputs for r in full.of_type("gcp:container/cluster:Cluster")}
    assert clusters["us-east-gke-cluster"].get("enableMultiNetworking") is True
    assert not clusters["us-central-gke-cluster"].get("enableMultiNetworking")
    # In the cluster: GKE's Network objects, the installers and the admission policies, through the
    # worker's provider, children of the worker's components.
    east = {r.urn for r in _on(full, "us-east")}
    software = _under(full, "us-east-gpudirect-tcpxo-software")
    kinds = {r.type.rsplit(":", 1)[1] for r in software if r.custom}
    assert {"Network", "GKENetworkParamSet", "DaemonSet"} <= kinds
    assert all(r.urn in east for r in software if r.custom)
    policies = _under(full, "us-east-gpudirect-admission")
    assert any(r.type.endswith(":ValidatingAdmissionPolicy") for r in policies)
    assert all(r.urn in east for r in policies if r.custom)
    # The team's GPUDirect namespace on the worker, where its GPUDirect Pods run.
    namespaces = {r.inputs["metadata"]["name"] for r in _on(full, "us-east") if r.type.endswith(":Namespace")}
    assert "gpudirect-research" in namespaces
    # Nothing of it on the manager or the other worker.
    central = {r.urn for r in _on(full, "us-central")}
    assert not any(r.urn in central for r in software + policies)
    summary = next(w for w in full.outputs["fleet"]["workers"] if w["name"] == "us-east")
    assert summary["gpudirect"]["TCPXO"]["pools"] == ["mega"]


def test_a_dra_worker_gets_the_driver_and_kueue_counts_its_claims(full: RunResult) -> None:
    driver = [r for r in _under(full, "us-central-dra-driver") if r.type == KUEUE_CHART]
    assert len(driver) == 1
    assert driver[0].urn in {r.urn for r in _on(full, "us-central")}

    def device_classes(worker: str) -> Any:
        (kueue,) = [r for r in _on(full, worker) if r.type == KUEUE_CHART and r.name.endswith("-kueue")]
        if "values" not in kueue.inputs:
            return None  # the chart's own Configuration
        config = yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
        return config.get("resources", {}).get("deviceClassMappings")

    # The worker's Kueue counts a claimed GPU as the quota's nvidia.com/gpu; the other worker's does
    # not need to.
    assert device_classes("us-central") == [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}
    ]
    assert device_classes("us-east") is None
    assert not [r for r in full.resources if r.name == "us-east-dra-driver"]


def test_a_workers_team_gets_its_training_data_on_that_worker(full: RunResult) -> None:
    central = {r.urn for r in _on(full, "us-central")}
    data = _under(full, "us-central-data-research")
    claims = [r for r in data if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    assert [(c.inputs["metadata"]["namespace"], c.inputs["metadata"]["name"]) for c in claims] == [
        ("research", "training")
    ]
    assert all(r.urn in central for r in data if r.type.startswith("kubernetes:"))
    # The Google service account is the worker cluster's, and the cluster mounts buckets.
    (account,) = [r for r in data if r.type == "gcp:serviceaccount/account:Account"]
    assert account.inputs["accountId"] == data_service_account_id("gpu-fleet-us-central", "research")
    clusters = {r.name: r.inputs for r in full.of_type("gcp:container/cluster:Cluster")}
    assert clusters["us-central-gke-cluster"]["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    summary = next(w for w in full.outputs["fleet"]["workers"] if w["name"] == "us-central")
    assert summary["trainingData"]["research"]["claims"] == ["training"]


def test_each_worker_watches_its_gpus_as_its_monitoring_says(full: RunResult) -> None:
    dashboards = {
        r.name: r for r in full.of_type("gcp:monitoring/dashboard:Dashboard") if r.name.startswith("us-")
    }
    # us-east: the stack file's default (a dashboard over GKE's managed DCGM); us-central: none.
    assert set(dashboards) == {"us-east-monitoring-dashboard"}
    assert '"GPUs: gpu-fleet-us-east"' in dashboards["us-east-monitoring-dashboard"].inputs["dashboardJson"]
    clusters = {r.name: r.inputs for r in full.of_type("gcp:container/cluster:Cluster")}
    assert "DCGM" in clusters["us-east-gke-cluster"]["monitoringConfig"]["enableComponents"]
    assert "DCGM" not in clusters["us-central-gke-cluster"]["monitoringConfig"]["enableComponents"]


def test_a_rack_worker_gets_the_drivers_compute_domains() -> None:
    raw = fleet_raw()
    east = raw["fleet"]["workers"][0]
    east.update(region="us-central1", cluster={**east["cluster"], "location": "us-central1-a"})
    # The rack runs the worker's own jobs: a fleet queue over it is refused (test_fleet.py).
    for team in east["batch"]["teams"]:
        team["pools"] = {"rack": {"gpus": 4}}
    raw["fleet"]["teams"][1]["queues"][0]["workers"] = ["us-central"]
    east["gpuPools"] = [
        {
            "name": "rack",
            "accelerator": "nvidia-gb200",
            "maxNodes": 4,
            "zones": ["us-central1-a"],
            "workloadPolicy": True,
            "reservation": {"type": "SPECIFIC", "name": "a4x-rack"},
        }
    ]
    result = render(fleet_config(raw))
    (chart,) = [r for r in _under(result, "us-east-dra-driver") if r.type == KUEUE_CHART]
    assert chart.urn in {r.urn for r in _on(result, "us-east")}
    assert chart.inputs["values"]["resources"]["computeDomains"]["enabled"] is True
    # The pool's workload policy comes with the pool, named after the worker's cluster.
    (policy,) = [r for r in _under(result, "us-east-gpu-rack") if r.type.endswith("ResourcePolicy")]
    assert policy.inputs["name"] == workload_policy_name("gpu-fleet-us-east", "rack")


def test_a_workers_samples_and_all_reduce_run_there(full: RunResult) -> None:
    east = {r.urn for r in _on(full, "us-east")}
    jobsets = [r for r in _under(full, "us-east-nccl-mega") if r.type.endswith(":JobSet")]
    assert len(jobsets) == 1 and jobsets[0].urn in east
    queue_name = jobsets[0].inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    # Its LocalQueue on the worker points at the worker's own ClusterQueue of the pool.
    (local,) = [
        r
        for r in _on(full, "us-east")
        if r.type.endswith(":LocalQueue") and r.inputs["metadata"]["name"] == queue_name
    ]
    assert local.inputs["metadata"]["namespace"] == "gpu-nccl-mega"
    assert local.inputs["spec"]["clusterQueue"] == "gpu-mega"
    central = {r.urn for r in _on(full, "us-central")}
    samples = [r for r in _under(full, "us-central-samples") if r.type.startswith("kubernetes:")]
    assert samples and all(r.urn in central for r in samples)
    summary = {w["name"]: w for w in full.outputs["fleet"]["workers"]}
    assert "nccl-allreduce-mega" in summary["us-east"]["sampleWorkloads"]
    assert "nvidia-smi-l4" in summary["us-central"]["sampleWorkloads"]


@pytest.mark.parametrize("key", ["serving", "gateway", "images"])
def test_what_a_worker_does_not_take_is_refused_by_name(key: str) -> None:
    raw = fleet_raw()
    raw["fleet"]["workers"][1][key] = []
    message = errors(raw)
    allowed = (
        "allowed keys here: access, batch, cluster, gpuPools, monitoring, name, network, "
        "podsReadyTimeoutMinutes, project, region, workloads"
    )
    assert f"gke-gpu:fleet.workers[1].{key}: unknown key; {allowed}" in message


def test_the_stacks_image_digests_pin_the_workers_images() -> None:
    raw = _full_fleet()
    plugin = repository(TCPXO_PLUGIN)
    digest = "sha256:" + "ab" * 32
    raw["images"] = {"digests": {plugin: digest}}
    result = render(fleet_config(raw))
    images = [
        container["image"]
        for r in _under(result, "us-east-gpudirect-tcpxo-software")
        if r.type.endswith(":DaemonSet")
        for container in [
            *r.inputs["spec"]["template"]["spec"].get("initContainers", []),
            *r.inputs["spec"]["template"]["spec"]["containers"],
        ]
    ]
    assert f"{TCPXO_PLUGIN}@{digest}" in images


def test_a_digest_for_an_image_no_cluster_of_the_fleet_runs_is_refused() -> None:
    raw = _full_fleet()
    # TCPX is A3 High's flavour: no worker runs its installer.
    raw["images"] = {"digests": {repository(TCPX_PLUGIN): "sha256:" + "ab" * 32}}
    message = errors(raw)
    assert f"gke-gpu:images.digests.{repository(TCPX_PLUGIN)}: " in message
    assert "is not an image this runs privileged or as root by tag" in message
    assert repository(TCPXO_PLUGIN) in message  # what the fleet's workers do run


def test_samples_on_the_manager_are_refused_with_where_they_go() -> None:
    raw = fleet_raw()
    raw["gpuPools"] = [{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1}]
    raw["workloads"] = ["nvidia-smi"]
    message = errors(raw)
    assert "gke-gpu:gpuPools: 1 pool(s) on the fleet's manager" in message
    assert "gke-gpu:workloads: not allowed on the fleet's manager" in message
    assert "gke-gpu:fleet.workers[].workloads" in message
