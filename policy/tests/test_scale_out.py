"""The scale-out rules (gke_gpu_policies/scale_out.py): GPUDirect pools in one zone, a Kueue queue for
every GPU pool, a queue label on every GPU JobSet. Each validator called directly with real
pulumi-policy argument objects, then the program's own Kueue objects through tools/check_policies."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy.gke_gpu_policies import rules, scale_out
from policy.gke_gpu_policies.constants import CLUSTER, NODE_POOL
from policy.tests.factories import (
    CLUSTER_QUEUE,
    DELETE,
    JOB,
    JOBSET,
    RESOURCE_FLAVOR,
    UNKNOWN_KINDS,
    check,
    cluster_queue,
    cpu_pool,
    gpu_pod_spec,
    gpu_pool,
    gpudirect_pool,
    jobset,
    one,
    resource_flavor,
    set_path,
    stack_args,
    standard_cluster,
    unknown,
    urn,
    workload,
)


def test_the_pack_serves_the_scale_out_policies() -> None:
    names = [p.name for p in scale_out.SCALE_OUT_POLICIES]
    assert names == [
        scale_out.GPUDIRECT_SINGLE_ZONE,
        scale_out.KUEUE_POOL_QUEUE,
        scale_out.JOBSET_QUEUE_LABEL,
    ]
    assert rules.POLICIES[-7:-4] == scale_out.SCALE_OUT_POLICIES


# --------------------------------------------------------------------------------------------------
# gpudirect-pool-single-zone


def single_zone(resource_props: dict[str, Any], **kwargs: Any) -> list[str]:
    return check(scale_out.validate_gpudirect_single_zone, NODE_POOL, resource_props, name="h100", **kwargs)


def test_a_gpudirect_pool_in_one_zone_complies() -> None:
    assert single_zone(gpudirect_pool()) == []
    assert single_zone(gpudirect_pool(), proxy=False) == []


def test_a_gpudirect_pool_in_three_zones_is_a_violation() -> None:
    zones = ["us-central1-a", "us-central1-b", "us-central1-c"]
    one(
        single_zone(gpudirect_pool(nodeLocations=zones)),
        scale_out.GPUDIRECT_SINGLE_ZONE,
        "node pool 'h100': attaches 8 GPUDirect NIC(s)",
        "spans 3 zones (nodeLocations: us-central1-a, us-central1-b, us-central1-c)",
        "GPUDirect NICs and the RoCE VPC are zonal",
        "cross-zone traffic adds latency and egress cost",
    )


def test_a_zonal_clusters_gpudirect_pool_without_node_locations_is_in_one_zone() -> None:
    assert single_zone(gpudirect_pool(nodeLocations=DELETE, location="us-central1-a")) == []


@pytest.mark.parametrize("locations", [DELETE, [], None])
def test_a_gpudirect_pool_without_node_locations_is_a_violation(locations: Any) -> None:
    one(
        single_zone(gpudirect_pool(nodeLocations=locations)),
        scale_out.GPUDIRECT_SINGLE_ZONE,
        "has no nodeLocations, so it spans every zone of its cluster",
    )


@pytest.mark.parametrize(
    "network_config", [DELETE, None, {}, {"additionalNodeNetworkConfigs": []}, {"enablePrivateNodes": True}]
)
def test_pools_without_gpudirect_nics_may_span_zones(network_config: Any) -> None:
    assert single_zone(gpu_pool(networkConfig=network_config)) == []
    assert single_zone(gpudirect_pool(networkConfig=network_config, nodeLocations=["a", "b"])) == []


def test_a_g4_pools_second_network_may_span_zones() -> None:
    """G4's extra gVNIC (secondNetwork) is not GPUDirect: the stack accepts it in several zones, and
    so does the policy; the same NICs on an A3 machine are still held to one zone."""
    zones = ["us-central1-a", "us-central1-b"]
    g4 = set_path(gpudirect_pool(nodeLocations=zones), "nodeConfig.machineType", "g4-standard-48")
    assert single_zone(g4) == []
    a3 = set_path(gpudirect_pool(nodeLocations=zones), "nodeConfig.machineType", "a3-megagpu-8g")
    one(single_zone(a3), scale_out.GPUDIRECT_SINGLE_ZONE, "spans 2 zones")


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_gpudirect_unknowns_are_not_violations(kind: str) -> None:
    assert single_zone(gpudirect_pool(nodeLocations=unknown(kind))) == []
    assert single_zone(gpudirect_pool(nodeLocations=[unknown(kind)])) == []
    assert single_zone(gpudirect_pool(networkConfig=unknown(kind), nodeLocations=["a", "b"])) == []
    three = ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert single_zone(gpudirect_pool(**{"networkConfig.additionalNodeNetworkConfigs": unknown(kind)})) == []
    args = {"networkConfig.additionalNodeNetworkConfigs": unknown(kind), "nodeLocations": three}
    assert single_zone(gpudirect_pool(**args)) == []
    # Two zones, one of them not known yet: still two.
    one(
        single_zone(gpudirect_pool(nodeLocations=["us-central1-a", unknown(kind)])),
        scale_out.GPUDIRECT_SINGLE_ZONE,
        "spans 2 zones (nodeLocations: us-central1-a, ?)",
    )


def test_single_zone_ignores_other_types() -> None:
    props = gpudirect_pool(nodeLocations=["a", "b"])
    assert check(scale_out.validate_gpudirect_single_zone, CLUSTER, props) == []


# --------------------------------------------------------------------------------------------------
# kueue-gpu-pool-queue

L4, A100 = "gpu-l4-serving-pool", "gpu-a100-pool"


def a100_pool(**changes: Any) -> dict[str, Any]:
    return gpu_pool(**{"name": "a100", "nodeConfig.guestAccelerators.0.type": "nvidia-tesla-a100", **changes})


def kueue_stack(*extra: tuple[str, str, dict[str, Any]], pools: bool = True) -> list[tuple[str, str, dict]]:
    """A cluster, a CPU pool and two GPU pools (l4-serving, a100), then `extra`."""
    resources: list[tuple[str, str, dict[str, Any]]] = [
        (CLUSTER, "gke-cluster", standard_cluster()),
        (NODE_POOL, "gke-system", cpu_pool()),
    ]
    if pools:
        resources += [(NODE_POOL, L4, gpu_pool()), (NODE_POOL, A100, a100_pool())]
    return [*resources, *extra]


def flavor(pool: str, **changes: Any) -> tuple[str, str, dict[str, Any]]:
    return (RESOURCE_FLAVOR, f"batch-{pool}-flavor", resource_flavor(pool, **changes))


def queue(*flavors: str, **changes: Any) -> tuple[str, str, dict[str, Any]]:
    name = changes.pop("name", f"queue-{'-'.join(flavors) or 'empty'}")
    return (CLUSTER_QUEUE, f"batch-{name}", cluster_queue(*flavors, name=name, **changes))


def kueue(resources: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str | None]]:
    """(message, URN) of each violation: a pool's violation carries the pool's URN."""
    found: list[tuple[str, str | None]] = []

    def report_violation(message: str, urn: str | None = None) -> None:
        found.append((message, urn))

    scale_out.validate_kueue_pool_queue(stack_args(resources), report_violation)  # -> None: synchronous
    return found


def test_every_gpu_pool_with_a_listed_flavor_complies() -> None:
    # As GpuBatchQueues declares them: a flavor and a ClusterQueue per pool.
    per_pool = kueue_stack(flavor("l4-serving"), flavor("a100"), queue("gpu-l4-serving"), queue("gpu-a100"))
    assert kueue(per_pool) == []
    # One ClusterQueue with both flavors, in either resource group.
    shared = kueue_stack(flavor("l4-serving"), flavor("a100"), queue("gpu-l4-serving", "gpu-a100"))
    assert kueue(shared) == []


def test_without_kueue_objects_the_rule_does_not_apply() -> None:
    assert kueue(kueue_stack()) == []


def test_a_gpu_pool_without_a_flavor_is_a_violation() -> None:
    found = kueue(kueue_stack(flavor("l4-serving"), queue("gpu-l4-serving")))
    assert len(found) == 1, found
    message, where = found[0]
    one(
        [message],
        scale_out.KUEUE_POOL_QUEUE,
        f"GPU node pool '{A100}' (a100): the stack runs Kueue but the pool has no queue",
        "no ResourceFlavor has spec.nodeLabels cloud.google.com/gke-nodepool: a100",
    )
    assert where == urn(NODE_POOL, A100)


def test_a_flavor_no_cluster_queue_lists_is_a_violation() -> None:
    found = kueue(kueue_stack(flavor("l4-serving"), flavor("a100"), queue("gpu-l4-serving")))
    one(
        [m for m, _ in found],
        scale_out.KUEUE_POOL_QUEUE,
        "ResourceFlavor(s) gpu-a100 select it, but no ClusterQueue lists them",
    )


def test_a_cluster_queue_alone_leaves_every_gpu_pool_without_a_queue() -> None:
    found = kueue(kueue_stack(queue(name="empty")))
    assert sorted(where or "" for _, where in found) == sorted([urn(NODE_POOL, A100), urn(NODE_POOL, L4)])
    # The CPU pool needs no queue; a stack with Kueue and no GPU pool is fine.
    assert kueue(kueue_stack(queue(name="empty"), pools=False)) == []


def test_a_flavor_of_another_api_version_counts() -> None:
    v1beta1 = RESOURCE_FLAVOR.replace("v1beta2", "v1beta1")
    _, name, props = flavor("a100")
    resources = kueue_stack(flavor("l4-serving"), (v1beta1, name, props), queue("gpu-l4-serving", "gpu-a100"))
    assert kueue(resources) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_kueue_unknowns_are_not_violations(kind: str) -> None:
    listed = queue("gpu-l4-serving", "gpu-a100")
    # The a100 flavor's node labels (or its name) not known yet: it may select the pool.
    assert (
        kueue(kueue_stack(flavor("l4-serving"), flavor("a100", **{"spec.nodeLabels": unknown(kind)}), listed))
        == []
    )
    assert (
        kueue(kueue_stack(flavor("l4-serving"), flavor("a100", **{"metadata.name": unknown(kind)}), listed))
        == []
    )
    # A queue's flavors not known yet: it may list the a100 flavor.
    unknown_queue = queue(name="q", **{"spec.resourceGroups.0.flavors": unknown(kind)})
    assert (
        kueue(kueue_stack(flavor("l4-serving"), flavor("a100"), queue("gpu-l4-serving"), unknown_queue)) == []
    )
    # ... but no queue can list a flavor that does not exist.
    found = kueue(kueue_stack(flavor("l4-serving"), queue("gpu-l4-serving"), unknown_queue))
    assert [where for _, where in found] == [urn(NODE_POOL, A100)]
    # The pool's name or accelerators not known yet.
    resources = kueue_stack(flavor("l4-serving"), queue("gpu-l4-serving"))
    resources[-3:-2] = [(NODE_POOL, A100, a100_pool(name=unknown(kind)))]
    assert kueue(resources) == []
    resources[-3:-2] = [(NODE_POOL, A100, a100_pool(**{"nodeConfig.guestAccelerators": unknown(kind)}))]
    assert kueue(resources) == []


# --------------------------------------------------------------------------------------------------
# jobset-gpu-queue-label


def queue_label(props: dict[str, Any], resource_type: str = JOBSET, **kwargs: Any) -> list[str]:
    return check(scale_out.validate_jobset_queue_label, resource_type, props, name="nccl", **kwargs)


def test_a_queued_gpu_jobset_complies() -> None:
    assert queue_label(jobset()) == []
    assert queue_label(jobset(), proxy=False) == []


@pytest.mark.parametrize(("label", "found"), [(None, "is missing"), ("", "is ''"), ("  ", "is '  '")])
def test_a_gpu_jobset_without_a_queue_label_is_a_violation(label: str | None, found: str) -> None:
    props = jobset(queue=label)
    one(
        queue_label(props),
        scale_out.JOBSET_QUEUE_LABEL,
        "JobSet 'nccl' (gpu-samples/nccl-allreduce): replicated job(s) workers ask for nvidia.com/gpu",
        f"metadata.labels[kueue.x-k8s.io/queue-name] {found}",
        "Kueue never admits it",
    )


@pytest.mark.parametrize(
    "pod_spec",
    [
        # Requests only, limits only, or an init container only.
        gpu_pod_spec(**{"containers.0.resources.limits": DELETE}),
        gpu_pod_spec(**{"containers.0.resources.requests": DELETE}),
        gpu_pod_spec(
            containers=[{"name": "main", "image": "busybox"}],
            initContainers=gpu_pod_spec()["containers"],
        ),
    ],
    ids=["requests", "limits", "init-container"],
)
def test_any_container_asking_for_gpus_needs_the_label(pod_spec: dict[str, Any]) -> None:
    one(queue_label(jobset(pod_spec, queue=None)), scale_out.JOBSET_QUEUE_LABEL, "workers")


def test_a_jobset_without_gpus_needs_no_label() -> None:
    cpu_only = gpu_pod_spec(**{"containers.0.resources": {"limits": {"cpu": "1"}}})
    assert queue_label(jobset(cpu_only, queue=None)) == []
    no_jobs = set_path(jobset(queue=None), "spec.replicatedJobs", [])
    assert queue_label(no_jobs) == []


def test_the_label_rule_ignores_other_types() -> None:
    assert queue_label(workload(JOB), JOB) == []
    v1 = JOBSET.replace("v1alpha2", "v1")
    assert queue_label(jobset(queue=None), v1) != []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_jobset_unknowns_are_not_violations(kind: str) -> None:
    assert queue_label(set_path(jobset(queue=None), "metadata.labels", unknown(kind))) == []
    assert queue_label(jobset(queue=unknown(kind))) == []
    assert queue_label(set_path(jobset(queue=None), "spec.replicatedJobs", unknown(kind))) == []
    pod = "spec.replicatedJobs.0.template.spec.template.spec"
    assert queue_label(set_path(jobset(queue=None), pod, unknown(kind))) == []
    assert queue_label(jobset(gpu_pod_spec(containers=[unknown(kind)]), queue=None)) == []
    # One job known to ask for GPUs is enough, whatever the others.
    props = jobset(queue=None)
    props["spec"]["replicatedJobs"].append(
        copy.deepcopy(props["spec"]["replicatedJobs"][0]) | {"name": "other", "template": unknown(kind)}
    )
    one(queue_label(props), scale_out.JOBSET_QUEUE_LABEL, "replicated job(s) workers ask")


# --------------------------------------------------------------------------------------------------
# The program's own Kueue objects (GpuBatchQueues), through tools/check_policies.


@pytest.fixture(scope="module")
def batch_document() -> dict[str, Any]:
    from tools import plan
    from tools.offline import run_program

    config = {
        "gcp:project": "test-project",
        "gcp:region": "us-central1",
        "gke-gpu:cluster": {"mode": "standard", "name": "gpu-test"},
        "gke-gpu:gpuPools": [
            {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2},
            {"name": "a100", "accelerator": "nvidia-tesla-a100", "gpusPerNode": 2, "maxNodes": 3},
        ],
        "gke-gpu:batch": {"kueue": True},
    }
    result = run_program(config, stack="test", preview=True)
    assert result.error is None, result.error
    return plan.to_document(result)


def test_the_programs_batch_queues_comply(batch_document: dict[str, Any]) -> None:
    from tools import check_policies

    types = [r["type"] for r in batch_document["resources"]]
    assert types.count(RESOURCE_FLAVOR) == types.count(CLUSTER_QUEUE) == 2  # not a vacuous pass
    notes: list[str] = []
    assert [str(v) for v in check_policies.check_document(batch_document, notes=notes)] == []
    assert notes == []


def test_a_batch_stack_missing_a_flavor_fails(batch_document: dict[str, Any]) -> None:
    from tools import check_policies

    document = copy.deepcopy(batch_document)
    document["resources"] = [r for r in document["resources"] if r["name"] != "batch-a100-flavor"]
    found = [(v.policy, v.resource_name) for v in check_policies.check_document(document)]
    assert found == [(scale_out.KUEUE_POOL_QUEUE, "gpu-a100-pool")]


@pytest.fixture(scope="module")
def train_document() -> dict[str, Any]:
    """The train stack (Pulumi.train.yaml): a GPUDirect-TCPXO pool, queued through Kueue."""
    from tests.conftest import stack_render
    from tools import plan

    result = stack_render("train")
    assert result.error is None, result.error
    return plan.to_document(result)


def gpudirect_pools(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for r in document["resources"]
        if r["type"] == NODE_POOL
        and (r["inputs"].get("networkConfig") or {}).get("additionalNodeNetworkConfigs")
    ]


def test_the_train_stack_complies_and_is_not_vacuous(train_document: dict[str, Any]) -> None:
    from tools import check_policies

    [pool] = gpudirect_pools(train_document)
    assert len(pool["inputs"]["nodeLocations"]) == 1
    assert any(r["type"] == RESOURCE_FLAVOR for r in train_document["resources"])
    assert check_policies.check_document(train_document) == []


def test_a_doctored_train_stack_violates_the_scale_out_rules(train_document: dict[str, Any]) -> None:
    from tools import check_policies

    document = copy.deepcopy(train_document)
    [pool] = gpudirect_pools(document)
    zone = pool["inputs"]["nodeLocations"][0]
    pool["inputs"]["nodeLocations"] = [zone, zone[:-1] + ("b" if zone[-1] != "b" else "c")]
    document["resources"] = [r for r in document["resources"] if r["type"] != RESOURCE_FLAVOR]
    stack = document["stack"]
    document["resources"].append(
        {
            "urn": urn(JOBSET, "nccl-allreduce", stack),
            "type": JOBSET,
            "name": "nccl-allreduce",
            "component": False,
            "inputs": jobset(queue=None),
        }
    )
    violations = check_policies.check_document(document)
    assert sorted((v.policy, v.resource_name) for v in violations) == sorted(
        [
            (scale_out.GPUDIRECT_SINGLE_ZONE, pool["name"]),
            (scale_out.KUEUE_POOL_QUEUE, pool["name"]),
            (scale_out.JOBSET_QUEUE_LABEL, "nccl-allreduce"),
        ]
    )
    assert all(v.mandatory for v in violations)
