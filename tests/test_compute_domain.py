"""The all-reduce on a GB200/GB300 NVL72 rack (issue 28 item 2): a ComputeDomain per test, its Pods
claiming the IMEX channel (cluster-toolkit's examples/gke-a4x NCCL test), the Arm build of Google's
test image, a floor for multi-node NVLink, and NVIDIA's DRA driver with ComputeDomains in the stack."""

from __future__ import annotations

from typing import Any

import pytest

from gke_gpu.workloads.nccl_allreduce_args import NcclAllReduceArgs
from tests.conftest import STANDARD_CLUSTER, config_error, render, stack_config
from tests.kubernetes_schemas import validate
from tests.test_nccl_allreduce import GPU_TOLERATION, declare, pod_of, refused
from tools.offline import RunResult

COMPUTE_DOMAIN = "kubernetes:resource.nvidia.com/v1beta1:ComputeDomain"
A4X: NcclAllReduceArgs = {
    "pool": "a4x",
    "node_selector": {"cloud.google.com/gke-nodepool": "a4x"},
    "tolerations": [GPU_TOLERATION],  # type: ignore[list-item]
    "machine_type": "a4x-highgpu-4g",
    "accelerator": "nvidia-gb200",
    "gpus_per_node": 4,
    "nodes": 2,
    "cluster_queue": "gpu-a4x",
    "compute_domain": True,
}
RACK_POOL = {
    "name": "a4x",
    "accelerator": "nvidia-gb200",
    "maxNodes": 2,
    "zones": ["us-central1-a"],
    "workloadPolicy": True,
    "reservation": {"type": "SPECIFIC", "name": "rack"},
}


@pytest.fixture(scope="module")
def a4x() -> RunResult:
    return declare(dict(A4X))


def test_a_rack_all_reduce_declares_its_compute_domain(a4x: RunResult) -> None:
    domain = a4x.one(COMPUTE_DOMAIN).inputs
    assert domain["metadata"] == {**domain["metadata"], "name": "nccl-a4x", "namespace": "gpu-nccl"}
    assert domain["spec"] == {
        "numNodes": 2,
        "channel": {"resourceClaimTemplate": {"name": "nccl-a4x-channel"}},
    }
    validate(domain)  # the vendored CRD (v0.4.0)


def test_each_pod_claims_the_channel_in_its_nccl_container_only(a4x: RunResult) -> None:
    pod = pod_of(a4x)["spec"]
    assert pod["resourceClaims"] == [
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "nccl-a4x-channel"}
    ]
    (main,) = pod["containers"]
    assert main["resources"]["claims"] == [{"name": "compute-domain-channel"}]
    # GKE's device plugin keeps the rack's GPUs (the driver's GPU allocation is off).
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert all("claims" not in c["resources"] for c in pod["initContainers"])
    assert (
        main["image"]
        == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic-arm64:v1.0.6"
    )
    assert {
        "key": "kubernetes.io/arch",
        "operator": "Equal",
        "value": "arm64",
        "effect": "NoSchedule",
    } in pod["tolerations"]


def test_the_floor_is_multi_node_nvlinks(a4x: RunResult) -> None:
    env = {e["name"]: e.get("value") for e in pod_of(a4x)["spec"]["containers"][0]["env"]}
    assert env["NCCL_ALLREDUCE_FLOOR_GBPS"] == "648.8"  # 80 % of the published 811 GB/s
    assert "MNNVL" in env["NCCL_ALLREDUCE_FLOOR_NOTE"] and "third party" in env["NCCL_ALLREDUCE_FLOOR_NOTE"]


def test_a_rack_without_a_compute_domain_is_refused_and_elsewhere_one_is() -> None:
    args: dict[str, Any] = {**A4X, "compute_domain": False}
    assert "compute_domain: required on nvidia-gb200" in refused(args)
    l4 = {
        **A4X,
        "machine_type": "g2-standard-24",
        "accelerator": "nvidia-l4",
        "gpus_per_node": 2,
    }
    assert "compute_domain: not allowed on nvidia-l4" in refused(l4)


@pytest.fixture(scope="module")
def rack() -> RunResult:
    return render(
        stack_config(
            cluster={**STANDARD_CLUSTER, "minimumVersion": "1.34"},
            gpuPools=[RACK_POOL],
            batch={"kueue": True},
            workloads=[{"name": "nccl-allreduce"}],
        )
    )


def test_a_rack_in_the_stack_gets_the_dra_driver_with_compute_domains(rack: RunResult) -> None:
    values = rack.one("kubernetes:helm.sh/v4:Chart", "dra-driver-chart").inputs["values"]
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert values["gpuResourcesEnabledOverride"] is False
    terms = values["kubeletPlugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-gb200"]}
            ]
        }
    ]
    domain = rack.one(COMPUTE_DOMAIN)
    assert domain.inputs["metadata"]["namespace"] == "gpu-nccl-a4x"


def test_a_rack_beside_a_dra_gpu_pool_must_take_dra_gpus_too() -> None:
    dra = {
        "name": "l4",
        "accelerator": "nvidia-l4",
        "maxNodes": 1,
        "draGpus": True,
        "driverVersion": "INSTALLATION_DISABLED",
    }
    message = config_error(
        {
            "cluster": {**STANDARD_CLUSTER, "minimumVersion": "1.34"},
            "gpuPools": [RACK_POOL, dra],
            "monitoring": {"dcgm": "none", "dashboard": False},
        }
    )
    assert "gpuPools[0].draGpus: required on 'a4x' (nvidia-gb200) beside a pool with draGpus" in message


def test_the_policy_pack_passes_the_rack_render_and_catches_a_missing_claim(rack: RunResult) -> None:
    from tools import check_policies, plan

    document = plan.to_document(rack)
    report = check_policies.report(document)
    assert report["passed"] and report["violations"] == [], report["summary"]
    for resource in document["resources"]:
        if resource["type"] == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet":
            pod = resource["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            del pod["resourceClaims"]
    report = check_policies.report(document)
    assert any("rack-workload-compute-domain" in str(v) for v in report["violations"])
