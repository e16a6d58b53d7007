"""Kueue and DRA claims (issue 28): Kueue 0.19.2 admits a queued Workload only if every DeviceClass its
Pods claim through a ResourceClaimTemplate is mapped in `resources.deviceClassMappings`, every request
is ExactCount, and its ClusterQueue covers the mapped resource (pkg/dra/claims.go,
pkg/scheduler/flavorassigner/flavorassigner.go; docs/multi-node-training.md, "Kueue and DRA claims").
The rules are modelled here on the rendered objects; the GB300 DRA pool's driver note."""

from __future__ import annotations

from typing import Any

import yaml

from gke_gpu.dra.claims import CHANNEL_DEVICE_CLASS, channel_template_name
from gke_gpu.stack.config import parse_settings
from gke_gpu.workloads.kueue_config import CHANNEL_RESOURCE, RDMA_NIC_RESOURCE
from tests.conftest import (
    PROJECT,
    RACK_POOL,
    REGION,
    STANDARD_CLUSTER,
    render,
    stack_config,
    stack_render,
)
from tests.test_gpudirect_dranet import DRANET_VERSION, ULTRA

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RCT = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RACK = RACK_POOL


def kueue_configuration(result: Any) -> dict[str, Any]:
    """The Configuration the Kueue chart gets; {} for the chart's own default (which maps no class)."""
    charts = result.of_type("kubernetes:helm.sh/v4:Chart")
    (chart,) = [r for r in charts if r.name.endswith("-kueue")]
    if "values" not in chart.inputs:
        return {}
    return yaml.safe_load(chart.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])


def claimed_requests(result: Any, namespace: str, template: str) -> list[dict[str, Any]]:
    """The device requests of a template a Pod names: ours as rendered; a ComputeDomain's channel
    template as the DRA driver's controller makes it (one request of CHANNEL_DEVICE_CLASS, the API's
    default mode ExactCount, count 1: dra/claims.py)."""
    for r in result.of_type(RCT):
        if (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]) == (namespace, template):
            return [req["exactly"] for req in r.inputs["spec"]["spec"]["devices"]["requests"]]
    for domain in [r for r in result.resources if r.type.endswith(":ComputeDomain")]:
        meta = domain.inputs["metadata"]
        if meta["namespace"] == namespace and channel_template_name(meta["name"]) == template:
            return [{"deviceClassName": CHANNEL_DEVICE_CLASS, "allocationMode": "ExactCount", "count": 1}]
    raise AssertionError(f"{namespace}/{template}: no such template in the render")


def inadmissible(result: Any) -> list[str]:
    """Why Kueue 0.19.2 would never admit each queued JobSet of the render (empty: all admissible)."""
    mappings = {
        device_class: mapping["name"]
        for mapping in kueue_configuration(result).get("resources", {}).get("deviceClassMappings", [])
        for device_class in mapping["deviceClassNames"]
    }
    local_queues = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["spec"]["clusterQueue"]
        for r in result.of_type(LOCAL_QUEUE)
    }
    covered = {
        r.inputs["metadata"]["name"]: {
            name for group in r.inputs["spec"]["resourceGroups"] for name in group["coveredResources"]
        }
        for r in result.of_type(CLUSTER_QUEUE)
    }
    why = []
    for jobset in result.of_type(JOBSET):
        meta = jobset.inputs["metadata"]
        queue = meta.get("labels", {}).get(QUEUE_LABEL)
        if queue is None:
            continue
        cluster_queue = local_queues[(meta["namespace"], queue)]
        for job in jobset.inputs["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            for claim in pod.get("resourceClaims", []):
                template = claim["resourceClaimTemplateName"]
                for request in claimed_requests(result, meta["namespace"], template):
                    device_class = request["deviceClassName"]
                    if request.get("allocationMode", "ExactCount") != "ExactCount":
                        why.append(f"{meta['name']}: {device_class} asks for {request['allocationMode']}")
                    elif device_class not in mappings:
                        why.append(f"{meta['name']}: DeviceClass {device_class} is not mapped")
                    elif mappings[device_class] not in covered[cluster_queue]:
                        why.append(f"{meta['name']}: {mappings[device_class]} not covered by {cluster_queue}")
    return why


def test_the_nvl72_stacks_rack_all_reduce_is_admissible() -> None:
    result = stack_render("nvl72")
    (jobset,) = result.of_type(JOBSET)
    assert QUEUE_LABEL in jobset.inputs["metadata"]["labels"]
    assert inadmissible(result) == []


def test_a_racks_channel_claims_are_mapped_and_counted_one_per_gpu() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[RACK],
            batch={"kueue": True},
            workloads=[{"name": "nccl-allreduce", "pool": "rack"}],
        )
    )
    mappings = kueue_configuration(result)["resources"]["deviceClassMappings"]
    assert {"name": CHANNEL_RESOURCE, "deviceClassNames": [CHANNEL_DEVICE_CLASS]} in mappings
    (queue,) = [r for r in result.of_type(CLUSTER_QUEUE) if r.inputs["metadata"]["name"] == "gpu-rack"]
    (group,) = queue.inputs["spec"]["resourceGroups"]
    assert CHANNEL_RESOURCE in group["coveredResources"]
    quota = {q["name"]: q["nominalQuota"] for q in group["flavors"][0]["resources"]}
    assert quota[CHANNEL_RESOURCE] == quota["nvidia.com/gpu"] == 8
    assert inadmissible(result) == []


def test_a_pool_that_is_no_rack_keeps_kueues_default_configuration() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2}],
            batch={"kueue": True},
        )
    )
    assert kueue_configuration(result) == {}
    (queue,) = result.of_type(CLUSTER_QUEUE)
    assert CHANNEL_RESOURCE not in queue.inputs["spec"]["resourceGroups"][0]["coveredResources"]


def test_the_all_reduce_on_a_dranet_pool_claims_its_nics_by_count_and_is_admissible() -> None:
    result = render(
        stack_config(
            cluster={**STANDARD_CLUSTER, "minimumVersion": DRANET_VERSION},
            gpuPools=[ULTRA],
            batch={"kueue": True},
            workloads=[{"name": "nccl-allreduce", "pool": "ultra"}],
        )
    )
    (jobset,) = result.of_type(JOBSET)
    assert QUEUE_LABEL in jobset.inputs["metadata"]["labels"]
    pod = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (claim,) = pod["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == "rdma-8"
    (request,) = claimed_requests(result, "gpu-nccl-ultra", "rdma-8")
    assert request == {"deviceClassName": "mrdma.google.com", "allocationMode": "ExactCount", "count": 8}
    mappings = kueue_configuration(result)["resources"]["deviceClassMappings"]
    assert {"name": RDMA_NIC_RESOURCE, "deviceClassNames": ["mrdma.google.com"]} in mappings
    (queue,) = result.of_type(CLUSTER_QUEUE)
    resources = queue.inputs["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    quota = {q["name"]: q["nominalQuota"] for q in resources}
    # 2 nodes x 8 NICs, as 2 nodes x 8 GPUs.
    assert quota[RDMA_NIC_RESOURCE] == quota["nvidia.com/gpu"] == 16
    assert inadmissible(result) == []


def test_a_teams_share_of_a_pool_gets_its_part_of_the_dra_quota() -> None:
    result = render(
        stack_config(
            cluster={**STANDARD_CLUSTER, "minimumVersion": DRANET_VERSION},
            gpuPools=[ULTRA],
            batch={"kueue": True, "teams": [{"name": "ml", "pools": {"ultra": {"gpus": 8}}}]},
        )
    )
    queues = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in result.of_type(CLUSTER_QUEUE)}
    for name in ("gpu-ultra", "gpu-ultra-ml"):
        resources = queues[name]["resourceGroups"][0]["flavors"][0]["resources"]
        quota = {q["name"]: q for q in resources}
        assert quota[RDMA_NIC_RESOURCE]["nominalQuota"] == quota["nvidia.com/gpu"]["nominalQuota"] == 8
        assert quota[RDMA_NIC_RESOURCE].get("borrowingLimit") == quota["nvidia.com/gpu"].get("borrowingLimit")


def test_a_gb300_dra_pool_warns_that_its_driver_is_the_users() -> None:
    rack_max = {
        **RACK,
        "name": "max",
        "accelerator": "nvidia-gb300",
        "zones": ["us-central1-b"],
        "draGpus": True,
        "driverVersion": "INSTALLATION_DISABLED",
    }
    raw = {
        "cluster": {**STANDARD_CLUSTER, "minimumVersion": "1.34"},
        "gpuPools": [rack_max],
        "monitoring": {"dcgm": "none", "dashboard": False},
    }
    _, warnings = parse_settings(raw, project=PROJECT, region=REGION, stack="test")
    notes = [w for w in warnings if w.startswith("gke-gpu:gpuPools[0].draGpus:")]
    assert len(notes) == 1, warnings
    assert "install the driver on its nodes yourself" in notes[0]
    gb200 = {**rack_max, "accelerator": "nvidia-gb200", "zones": ["us-central1-a"]}
    _, warnings = parse_settings({**raw, "gpuPools": [gb200]}, project=PROJECT, region=REGION, stack="test")
    assert not [w for w in warnings if "draGpus:" in w]


def test_a_teams_gpudirect_namespace_has_a_template_kueue_admits() -> None:
    """A team's queued job on a DRANET pool claims the node's NICs by count: its GPUDirect namespace gets
    `rdma-8` (ExactCount 8, the class mapped, the team's ClusterQueue covering it) beside `default-rdma`
    (allocation mode All, which Kueue 0.19.2 never admits: pkg/dra/claims.go:93-98)."""
    result = render(
        stack_config(
            cluster={**STANDARD_CLUSTER, "minimumVersion": DRANET_VERSION},
            gpuPools=[ULTRA],
            batch={"kueue": True, "teams": [{"name": "ml", "pools": {"ultra": {"gpus": 8}}}]},
        )
    )
    (request,) = claimed_requests(result, "gpudirect-ml", "rdma-8")
    assert request == {"deviceClassName": "mrdma.google.com", "allocationMode": "ExactCount", "count": 8}
    mappings = kueue_configuration(result)["resources"]["deviceClassMappings"]
    assert any(
        "mrdma.google.com" in m["deviceClassNames"] and m["name"] == RDMA_NIC_RESOURCE for m in mappings
    )
    (default,) = claimed_requests(result, "gpudirect-ml", "default-rdma")
    assert default["allocationMode"] == "All"
