"""GPUDirect-RDMA through GKE's managed DRANET (issue 28 item 3): the pool flag that chooses it over
multi-networking, the node pool's accelerator network profile and label, the ResourceClaimTemplate
`default-rdma` and the Pods that claim it, and the refusals (machine, GKE version, the flag alone)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gke_gpu import GpuNodePool, InvalidArgsError
from gke_gpu.gpudirect.dranet import DranetClaimTemplates, claim_template_spec
from gke_gpu.gpudirect.flavors import GpuDirectFlavor
from gke_gpu.gpudirect.pod_parts import dranet_pod_parts, gpudirect_pod_parts
from gke_gpu.workloads.nccl_allreduce import NcclAllReduce
from tests.conftest import A4X_POOL, STANDARD_CLUSTER, ULTRA_POOL, config_error, render, stack_config
from tests.kubernetes_schemas import validate
from tools.offline import run_program
from tools.plan import kubernetes_objects, to_document

DRANET_VERSION = "1.34.1-gke.1829001"
CLUSTER = {**STANDARD_CLUSTER, "minimumVersion": DRANET_VERSION}
ULTRA = {**ULTRA_POOL, "gpudirectNetworking": "dranet"}
A4X = {**A4X_POOL, "gpudirectNetworking": "dranet"}
MEGA = {**ULTRA, "name": "mega", "accelerator": "nvidia-h100-mega-80gb", "zones": ["us-central1-a"]}
RCT = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"


def keys(*pools: dict, cluster: dict | None = None, **more: Any) -> dict:
    return {"cluster": cluster or CLUSTER, "gpuPools": list(pools), **more}


def _jobset_pod(result: Any) -> dict[str, Any]:
    (jobset,) = [r for r in result.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")]
    return jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


# -- the pool and the cluster ----------------------------------------------------------------------


def test_a_dranet_pool_takes_gkes_networks_not_the_stacks() -> None:
    result = render(stack_config(**keys(ULTRA)))
    pool = result.one("gcp:container/nodePool:NodePool", "gpu-ultra-pool").inputs
    # GKE creates the VPCs and subnets: the accelerator network profile, and no NICs of ours.
    assert pool["networkConfig"] == {"acceleratorNetworkProfile": "auto"}
    assert pool["nodeConfig"]["labels"]["cloud.google.com/gke-networking-dra-driver"] == "true"
    vpcs = [r.inputs["name"] for r in result.of_type("gcp:compute/network:Network")]
    assert vpcs == ["gpu-test-vpc"], "only the cluster's own VPC"
    cluster = result.one("gcp:container/cluster:Cluster").inputs
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"  # DRANET's need, always on here
    assert "enableMultiNetworking" not in cluster
    assert not result.of_type("kubernetes:networking.gke.io/v1:Network")
    # gIB is still needed on the nodes: NCCL's net plugin, whatever attaches the NICs.
    installers = [r.inputs["metadata"]["name"] for r in result.of_type("kubernetes:apps/v1:DaemonSet")]
    assert "nccl-rdma-installer" in installers
    assert result.outputs["gpuPools"][0]["gpudirect"] == {
        "flavor": "RDMA",
        "networking": "dranet",
        "claimTemplate": "default-rdma",
    }


def test_the_accelerator_network_profile_replaces_the_pool_when_it_changes() -> None:
    from gke_gpu.gpu.node_pool import REPLACE_ON_CHANGE

    assert "networkConfig.acceleratorNetworkProfile" in REPLACE_ON_CHANGE


def test_one_flag_per_pool_picks_dranet_or_multi_networking_beside_each_other() -> None:
    multi = {**ULTRA, "name": "b200", "accelerator": "nvidia-b200", "gpudirectNetworking": "multiNetwork"}
    result = render(stack_config(**keys(ULTRA, multi)))
    pools = {p["name"]: p["gpudirect"]["networking"] for p in result.outputs["gpuPools"]}
    assert pools == {"ultra": "dranet", "b200": "multiNetwork"}
    b200 = result.one("gcp:container/nodePool:NodePool", "gpu-b200-pool").inputs["networkConfig"]
    assert len(b200["additionalNodeNetworkConfigs"]) == 9 and "acceleratorNetworkProfile" not in b200
    assert result.one("gcp:container/cluster:Cluster").inputs["enableMultiNetworking"] is True
    networks = {
        r.inputs["metadata"]["name"] for r in result.of_type("kubernetes:networking.gke.io/v1:Network")
    }
    assert networks == {"gvnic-1", *(f"rdma-{i}" for i in range(8))}
    # The stack output users copy from: both ways, each for its own pools.
    output = result.outputs["gpudirect"]["RDMA"]
    assert output["pools"] == ["ultra", "b200"]
    assert "networking.gke.io/interfaces" in output["pod"]["annotations"]
    assert output["dranetPod"]["annotations"] == {}
    assert output["dranetPod"]["claims"] == [{"name": "rdma-nics"}]


def test_a4x_on_dranet_keeps_the_arm64_gib_installer() -> None:
    result = render(stack_config(**keys(A4X)))
    pool = result.one("gcp:container/nodePool:NodePool", "gpu-gb-pool").inputs
    assert pool["networkConfig"] == {"acceleratorNetworkProfile": "auto"}
    (installer,) = result.of_type("kubernetes:apps/v1:DaemonSet")
    assert installer.inputs["metadata"]["name"] == "nccl-rdma-a4x-installer"


# -- the claim template and the Pods ---------------------------------------------------------------


def test_the_claim_template_is_cluster_toolkits_and_valid_resource_k8s_io_v1() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "default-rdma", "namespace": "team"},
        "spec": claim_template_spec(),
    }
    validate(template)
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request == {
        "name": "req-mrdma",
        "exactly": {"deviceClassName": "mrdma.google.com", "allocationMode": "All"},
    }


def test_the_all_reduce_on_a_dranet_pool_claims_the_nics_instead_of_annotating_them() -> None:
    result = render(
        stack_config(
            **keys(ULTRA, batch={"kueue": True}, workloads=[{"name": "nccl-allreduce", "pool": "ultra"}])
        )
    )
    pod = _jobset_pod(result)
    assert not any(k.startswith("networking.gke.io/") for k in pod["metadata"].get("annotations", {}))
    # By count (ExactCount 8), which Kueue admits: tests/test_kueue_dra.py.
    assert pod["spec"]["resourceClaims"] == [{"name": "rdma-nics", "resourceClaimTemplateName": "rdma-8"}]
    (main,) = pod["spec"]["containers"]
    assert main["resources"]["claims"] == [{"name": "rdma-nics"}]
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "8"
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod["spec"]})
    templates = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]) for r in result.of_type(RCT)
    }
    # The all-reduce's own namespace, and the default team's GPUDirect namespace.
    assert templates == {
        ("gpu-nccl-ultra", "rdma-8"),
        ("gpudirect-default", "default-rdma"),
        ("gpudirect-default", "rdma-8"),  # what a queued job claims: Kueue admits no `All`
    }
    for obj in kubernetes_objects(to_document(result)):
        if obj["kind"] == "ResourceClaimTemplate":
            validate(obj)


def test_teams_get_the_template_only_where_their_pools_are_on_dranet() -> None:
    multi = {**ULTRA, "name": "b200", "accelerator": "nvidia-b200", "gpudirectNetworking": "multiNetwork"}
    batch = {
        "kueue": True,
        "teams": [
            {"name": "research", "pools": {"ultra": {"gpus": 8}}},
            {"name": "prod", "pools": {"b200": {"gpus": 8}}},
        ],
    }
    result = render(stack_config(**keys(ULTRA, multi, batch=batch)))
    namespaces = sorted({r.inputs["metadata"]["namespace"] for r in result.of_type(RCT)})
    assert namespaces == ["gpudirect-research"]


def test_dranet_pod_parts_are_the_flavours_without_annotations_plus_the_claim() -> None:
    parts = dranet_pod_parts(GpuDirectFlavor.RDMA)
    plain = gpudirect_pod_parts(GpuDirectFlavor.RDMA)
    assert parts["annotations"] == {}
    assert {k: v for k, v in parts.items() if k not in ("annotations", "resourceClaims", "claims")} == {
        k: v for k, v in plain.items() if k != "annotations"
    }
    assert parts["claims"] == [{"name": "rdma-nics"}]
    json.dumps(parts)
    with pytest.raises(ValueError, match="TCPXO has no MRDMA NICs"):
        dranet_pod_parts(GpuDirectFlavor.TCPXO)


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pools", "cluster", "expected"),
    [
        (
            [MEGA],
            CLUSTER,
            "gke-gpu:gpuPools[0].gpudirectNetworking: 'dranet' is not offered on a3-megagpu-8g (TCPXO): "
            "GKE's DRANET claims RDMA NICs (DeviceClass mrdma.google.com), which only A3 Ultra, A4, A4X "
            "and A4X Max have; allowed there: 'multiNetwork'",
        ),
        (
            [ULTRA],
            {**STANDARD_CLUSTER, "minimumVersion": "1.34.1-gke.1000000"},
            "gke-gpu:gpuPools[0].gpudirectNetworking: GKE managed DRANET needs GKE 1.34.1-gke.1829001 or "
            "later, but gke-gpu:cluster.minimumVersion is '1.34.1-gke.1000000'",
        ),
        (
            [ULTRA],
            {**STANDARD_CLUSTER, "minimumVersion": "1.33"},
            "gke-gpu:gpuPools[0].gpudirectNetworking: GKE managed DRANET needs GKE 1.34.1-gke.1829001",
        ),
        (
            [{**ULTRA, "gpudirect": False}],
            CLUSTER,
            "gke-gpu:gpuPools[0].gpudirectNetworking: 'dranet' is only allowed with gpudirect: true",
        ),
        (
            [{**ULTRA, "gpudirectNetworking": "roce"}],
            CLUSTER,
            "gke-gpu:gpuPools[0].gpudirectNetworking: 'roce' is not allowed",
        ),
    ],
)
def test_dranet_is_refused_where_gke_does_not_offer_it(pools: list, cluster: dict, expected: str) -> None:
    message = config_error(keys(*pools, cluster=cluster))
    assert expected in message, message


def test_every_independent_dranet_problem_is_listed_in_one_run() -> None:
    message = config_error(
        keys(MEGA, {**ULTRA, "gpudirect": False}, cluster={**STANDARD_CLUSTER, "minimumVersion": "1.33"})
    )
    assert "gpuPools[0].gpudirectNetworking: 'dranet' is not offered on a3-megagpu-8g" in message
    assert "gpuPools[1].gpudirectNetworking: 'dranet' is only allowed with gpudirect: true" in message


def test_a_refused_dranet_pool_declares_nothing() -> None:
    result = run_program(stack_config(**keys(MEGA)), stack="test")
    assert result.error is not None and not result.resources


def test_dranet_is_standard_only() -> None:
    message = config_error(
        {"cluster": {"mode": "autopilot", "name": "gpu-test"}, "gpuPools": [{**ULTRA, "zones": None}]}
    )
    assert "gke-gpu:gpuPools[0].gpudirectNetworking: not allowed on Autopilot" in message


def test_gpu_node_pool_refuses_nics_of_its_own_on_dranet() -> None:
    args = {
        "name": "ultra",
        "accelerator": "nvidia-h200-141gb",
        "gpus_per_node": 8,
        "max_nodes": 2,
        "zones": ["us-central1-b"],
        "gpudirect": True,
        "gpudirect_networking": "dranet",
        "project": "my-project",
        "location": "us-central1",
        "cluster_name": "c",
        "additional_node_networks": [{"network": "n", "subnetwork": "s"}] * 9,
    }
    with pytest.raises(InvalidArgsError) as info:
        GpuNodePool.check_args("ultra", args)  # type: ignore[arg-type]
    assert any(p.startswith("additional_node_networks: GKE's DRANET creates") for p in info.value.problems)
    del args["additional_node_networks"]
    GpuNodePool.check_args("ultra", args)  # type: ignore[arg-type]


def test_the_components_refuse_dranet_args_by_name() -> None:
    with pytest.raises(InvalidArgsError) as info:
        DranetClaimTemplates.check_args("d", {"namespaces": ["a", "a"]})
    assert info.value.problems == ["namespaces[1]: a is listed twice"]
    with pytest.raises(InvalidArgsError) as info:
        DranetClaimTemplates.check_args("d", {"namespaces": ["a"], "nic_counts": [8, 4, 8]})
    assert info.value.problems == ["nic_counts[2]: 8 is listed twice"]
    with pytest.raises(InvalidArgsError) as info:
        DranetClaimTemplates.check_args("d", {"namespaces": ["a"], "nic_counts": [0]})
    assert any(p.startswith("nic_counts[0]") for p in info.value.problems), info.value.problems
    base = {
        "pool": "mega",
        "machine_type": "a3-megagpu-8g",
        "accelerator": "nvidia-h100-mega-80gb",
        "gpus_per_node": 8,
        "cluster_queue": "q",
        "node_selector": {},
        "gpudirect": "TCPXO",
        "gpudirect_networking": "dranet",
    }
    with pytest.raises(InvalidArgsError) as info:
        NcclAllReduce.check_args("t", base)  # type: ignore[arg-type]
    assert any(
        p.startswith("gpudirect_networking: 'dranet' is not allowed with gpudirect TCPXO")
        for p in info.value.problems
    )


def test_the_dranet_all_reduce_pod_is_admitted_by_the_gpudirect_pod_policy() -> None:
    """The claim adds nothing the confining admission policy (gpudirect/admission_cel.py) refuses."""
    from tests.admission_eval import evaluate

    result = render(
        stack_config(
            **keys(ULTRA, batch={"kueue": True}, workloads=[{"name": "nccl-allreduce", "pool": "ultra"}])
        )
    )
    template = _jobset_pod(result)
    pod = {"metadata": template["metadata"], "spec": template["spec"]}
    policies = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in result.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    }
    (bound,) = [
        r.inputs["spec"]
        for r in result.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
        if r.inputs["spec"]["policyName"] == "gke-gpu-gpudirect-pods"
    ]
    verdict = evaluate(policies["gke-gpu-gpudirect-pods"], bound, pod, "gpu-nccl-ultra")
    assert verdict.applies and verdict.admitted, verdict.denied
