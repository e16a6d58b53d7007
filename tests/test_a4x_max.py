"""A4X Max (GB300, `a4x-maxgpu-4g-metal`, Arm bare metal) GPUDirect pools (issue 28 item 3): the IDPF
VPC and the `<zone>-vpc-roce-metal` RoCE VPC the stack creates, the node pool's additional networks,
DRANET label, huge pages and labels, the claim template, ASAPD-lite against cluster-toolkit's manifest,
the all-reduce's Pod, and the refusals by key. Sources: components/gpudirect/flavors.py, asapd.py and
components/gpu/bare_metal.py."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.gpudirect.flavors import GpuDirectFlavor
from gke_gpu.gpudirect.pod_parts import dranet_pod_parts
from tests.conftest import STANDARD_CLUSTER, config_error, render, stack_config
from tests.kubernetes_schemas import validate
from tools.plan import kubernetes_objects, to_document

UPSTREAM = Path(__file__).parent / "upstream" / "cluster-toolkit" / "examples" / "gke-a4x-max-bm"
ASAPD_BLOB = "7cb10745b4c41565e7690121b4da05ce83c2702c"  # git blob at cluster-toolkit 1047080375af
CLUSTER = {**STANDARD_CLUSTER, "location": "us-central1-b", "minimumVersion": "1.35"}
MAX = {
    "name": "rack",
    "accelerator": "nvidia-gb300",
    "maxNodes": 18,
    "zones": ["us-central1-b"],
    "workloadPolicy": True,
    "reservation": {"type": "SPECIFIC", "name": "gb300-rack"},
    "gpudirect": True,
}
NODE_POOL = "gcp:container/nodePool:NodePool"
RCT = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"


def keys(*pools: dict, cluster: dict | None = None, **more: Any) -> dict:
    return {"cluster": cluster or CLUSTER, "gpuPools": list(pools), **more}


@pytest.fixture(scope="module")
def rack() -> Any:
    return render(
        stack_config(
            **keys(
                MAX, batch={"kueue": True}, workloads=[{"name": "nccl-allreduce", "pool": "rack", "nodes": 2}]
            )
        )
    )


def test_the_stack_creates_an_idpf_vpc_and_a_roce_metal_vpc_without_subnets_of_its_own(rack: Any) -> None:
    vpcs = {r.inputs["name"]: r.inputs for r in rack.of_type("gcp:compute/network:Network")}
    assert set(vpcs) == {"gpu-test-vpc", "gpu-test-a4xmax-idpf", "gpu-test-a4xmax-rdma"}
    roce = vpcs["gpu-test-a4xmax-rdma"]
    assert (
        roce["networkProfile"] == "projects/test-project/global/networkProfiles/us-central1-b-vpc-roce-metal"
    )
    assert roce["mtu"] == vpcs["gpu-test-a4xmax-idpf"]["mtu"] == 8896
    assert "networkProfile" not in vpcs["gpu-test-a4xmax-idpf"]
    # The RoCE metal profile provides the VPC's one subnet: the stack creates only the IDPF NIC's.
    subnets = {r.inputs["name"]: r.inputs for r in rack.of_type("gcp:compute/subnetwork:Subnetwork")}
    assert set(subnets) == {"gpu-test-nodes", "gpu-test-a4xmax-idpf"}
    firewalls = [r.inputs["name"] for r in rack.of_type("gcp:compute/firewall:Firewall")]
    assert "gpu-test-a4xmax-idpf-internal" in firewalls
    assert not any("a4xmax-rdma" in name for name in firewalls)


def test_the_pool_attaches_them_labels_its_nodes_for_dranet_and_sets_huge_pages(rack: Any) -> None:
    pool = rack.one(NODE_POOL, "gpu-rack-pool").inputs
    roce = {"network": "gpu-test-a4xmax-rdma", "subnetwork": "default-subnet-1-gpu-test-a4xmax-rdma"}
    assert pool["networkConfig"] == {
        "additionalNodeNetworkConfigs": [
            {"network": "gpu-test-a4xmax-idpf", "subnetwork": "gpu-test-a4xmax-idpf"},
            *[roce] * 8,
        ]
    }
    labels = pool["nodeConfig"]["labels"]
    assert labels["cloud.google.com/gke-networking-dra-driver"] == "true"
    assert labels["cloud.google.com/gke-dpv2-unified-cni"] == "cni-migration"
    assert pool["nodeConfig"]["linuxNodeConfig"] == {"hugepagesConfig": {"hugepageSize2m": 4096}}
    assert pool["placementPolicy"]["type"] == "COMPACT" and pool["placementPolicy"]["policyName"]
    # DRANET hands the NICs to Pods: no multi-networking, no Network objects.
    assert "enableMultiNetworking" not in rack.one("gcp:container/cluster:Cluster").inputs
    assert not rack.of_type("kubernetes:networking.gke.io/v1:Network")
    assert not rack.of_type("kubernetes:networking.gke.io/v1:GKENetworkParamSet")
    assert rack.outputs["gpuPools"][0]["gpudirect"] == {
        "flavor": "RDMA-A4X-Max",
        "networking": "dranet",
        "claimTemplate": "default-rdma",
    }


def test_other_pools_get_no_huge_pages_or_bare_metal_labels() -> None:
    result = render(stack_config(**keys({"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1})))
    node_config = result.one(NODE_POOL, "gpu-l4-pool").inputs["nodeConfig"]
    assert "linuxNodeConfig" not in node_config
    assert "cloud.google.com/gke-dpv2-unified-cni" not in node_config["labels"]


def test_claim_templates_are_valid_resource_k8s_io_v1_and_the_all_reduce_runs_on_the_rack(rack: Any) -> None:
    templates = [
        obj for obj in kubernetes_objects(to_document(rack)) if obj["kind"] == "ResourceClaimTemplate"
    ]
    assert {(t["metadata"]["namespace"], t["metadata"]["name"]) for t in templates} >= {
        ("gpudirect-default", "default-rdma")
    }
    for template in templates:
        validate(template)
    (jobset,) = rack.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    pod = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    # Within one rack the all-reduce measures multi-node NVLink: its Pods claim the ComputeDomain's
    # channel (as on A4X, docs/multi-node-training.md "NVL72 racks"), not the RDMA NICs.
    assert [c["name"] for c in pod["resourceClaims"]] == ["compute-domain-channel"]
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod})


def test_a4x_max_pod_parts_use_the_images_own_gib_as_cluster_toolkits_test_does() -> None:
    parts = dranet_pod_parts(GpuDirectFlavor.RDMA_A4X_MAX)
    assert parts["annotations"] == {}
    env = {e["name"]: e["value"] for e in parts["env"]}
    assert env == {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/gib/lib64"}
    assert {v["hostPath"]["path"] for v in parts["volumes"] if "hostPath" in v} == {
        "/home/kubernetes/bin/nvidia"
    }
    assert parts["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"]}
    assert parts["resourceClaims"] == [{"name": "rdma-nics", "resourceClaimTemplateName": "default-rdma"}]


def test_the_gpudirect_pod_policy_admits_the_a4x_max_all_reduce(rack: Any) -> None:
    from tests.admission_eval import evaluate

    (jobset,) = rack.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    template = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    policies = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in rack.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    }
    if "gke-gpu-gpudirect-pods" not in policies:
        pytest.skip("no GPUDirect Pod policy in this render")
    (bound,) = [
        r.inputs["spec"]
        for r in rack.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
        if r.inputs["spec"]["policyName"] == "gke-gpu-gpudirect-pods"
    ]
    namespace = jobset.inputs["metadata"]["namespace"]
    verdict = evaluate(policies["gke-gpu-gpudirect-pods"], bound, template, namespace)
    assert verdict.admitted, verdict.denied


# -- ASAPD-lite against cluster-toolkit's manifest ------------------------------------------------


def _upstream() -> dict[str, Any]:
    data = (UPSTREAM / "asapd-lite-installer.yaml").read_bytes()
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == ASAPD_BLOB, "vendored verbatim"
    return yaml.safe_load(data)


def test_asapd_lite_mirrors_cluster_toolkits_daemon_set(rack: Any) -> None:
    (ours,) = [
        r.inputs
        for r in rack.of_type("kubernetes:apps/v1:DaemonSet")
        if r.inputs["metadata"]["name"] == "asapd-lite"
    ]
    theirs = _upstream()
    pod, their_pod = ours["spec"]["template"]["spec"], theirs["spec"]["template"]["spec"]
    assert ours["metadata"]["namespace"] == theirs["metadata"]["namespace"] == "kube-system"
    assert ours["spec"]["updateStrategy"] == theirs["spec"]["updateStrategy"]
    for field in ("priorityClassName", "tolerations", "hostNetwork", "hostPID"):
        assert pod[field] == their_pod[field], field
    (container,), (their,) = pod["containers"], their_pod["containers"]
    assert container["image"] == their["image"]
    assert container["securityContext"]["privileged"] is their["securityContext"]["privileged"] is True
    assert container["env"] == their["env"]
    assert container["livenessProbe"] == their["livenessProbe"]
    assert container["readinessProbe"] == their["readinessProbe"]
    assert container["resources"]["limits"] == their["resources"]["limits"]
    assert "/usr/local/bin/run_asapd_lite.sh" in container["args"][0] and "dadfailed" in container["args"][0]

    def host_paths(spec: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
        volumes = {v["name"]: v for v in spec["volumes"]}
        return {
            m["mountPath"]: volumes[m["name"]].get("hostPath", volumes[m["name"]].get("emptyDir"))
            for m in c["volumeMounts"]
        }

    assert host_paths(pod, container) == host_paths(their_pod, their)
    # Narrower on purpose: the flavour's accelerator on arm64 (and the stack's pools), where
    # upstream selects the machine types on COS.
    (their_term,) = their_pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert "a4x-maxgpu-4g-metal" in their_term["matchExpressions"][0]["values"]


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pools", "cluster", "expected"),
    [
        (
            [{**MAX, "gpudirectNetworking": "multiNetwork"}],
            CLUSTER,
            "gke-gpu:gpuPools[0].gpudirectNetworking: 'multiNetwork' is not offered on a4x-maxgpu-4g-metal "
            "(RDMA-A4X-Max): its RDMA NICs reach Pods through GKE's DRANET only",
        ),
        (
            [MAX],
            {**CLUSTER, "minimumVersion": "1.34.1-gke.1000000"},
            "gke-gpu:gpuPools[0].gpudirectNetworking: GKE managed DRANET needs GKE 1.34.1-gke.1829001",
        ),
        (
            [{**MAX, "zones": ["us-central1-b", "us-central1-c"]}],
            CLUSTER,
            "gke-gpu:gpuPools[0].zones:",
        ),
    ],
    ids=["multi-networking", "dranet-version", "two-zones"],
)
def test_a4x_max_gpudirect_is_refused_by_key(pools: list, cluster: dict, expected: str) -> None:
    message = config_error(keys(*pools, cluster=cluster))
    assert expected in message, message


def test_dranet_written_out_is_the_same_as_the_default() -> None:
    written = render(stack_config(**keys({**MAX, "gpudirectNetworking": "dranet"})))
    pool = written.one(NODE_POOL, "gpu-rack-pool").inputs
    assert len(pool["networkConfig"]["additionalNodeNetworkConfigs"]) == 9


def test_every_kubernetes_object_of_the_rack_stack_is_valid(rack: Any) -> None:
    objects = kubernetes_objects(to_document(rack))
    assert {"DaemonSet", "ResourceClaimTemplate", "ComputeDomain", "JobSet"} <= {o["kind"] for o in objects}
    for obj in objects:
        validate(obj)
