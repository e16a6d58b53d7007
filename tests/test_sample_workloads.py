"""Sample GPU workloads: each lands on its pool, asks for GPUs the pool can give, and runs hardened."""

from __future__ import annotations

import pytest

from components.sample_workloads import PYTORCH_SCRIPT
from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tools.offline import run_stack

A100_SHARED = {
    "name": "a100",
    "accelerator": "nvidia-tesla-a100",
    "maxNodes": 1,
    "migPartitionSize": "1g.5gb",
    "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2},
}
T4_MPS = {
    "name": "t4",
    "accelerator": "nvidia-tesla-t4",
    "maxNodes": 1,
    "sharing": {"strategy": "MPS", "maxClientsPerGpu": 4},
}


def workload(result, name: str) -> dict:
    matches = [
        r.inputs
        for r in result.resources
        if r.type in ("kubernetes:batch/v1:Job", "kubernetes:apps/v1:Deployment")
        and r.inputs["metadata"]["name"] == name
    ]
    assert len(matches) == 1, [r.name for r in result.resources]
    return matches[0]


def pod(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def gpu_limits(obj: dict) -> list[tuple[str, str]]:
    return [
        (c["resources"]["limits"]["nvidia.com/gpu"], c["resources"]["requests"]["nvidia.com/gpu"])
        for c in pod(obj)["containers"]
    ]


def test_dev_samples_target_the_spot_l4_profile() -> None:
    result = run_stack("dev")
    for name in ("nvidia-smi-l4", "cuda-vector-add-l4"):
        spec = pod(workload(result, name))
        assert spec["nodeSelector"] == {"cloud.google.com/compute-class": "gpu-l4"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        assert gpu_limits(workload(result, name)) == [("1", "1")]


def test_jobs_are_hardened_bounded_and_pinned() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4_POOL],
            workloads=["nvidia-smi", "cuda-vector-add", "pytorch-smoke"],
        )
    )
    for name in ("nvidia-smi-l4", "cuda-vector-add-l4", "pytorch-smoke-l4"):
        job = workload(result, name)
        spec = job["spec"]
        assert spec["backoffLimit"] == 1
        assert spec["ttlSecondsAfterFinished"] == 86400
        assert spec["activeDeadlineSeconds"] == 3600
        assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["type"] == "DisruptionTarget"
        p = pod(job)
        assert p["restartPolicy"] == "Never"
        assert p["automountServiceAccountToken"] is False
        assert p["securityContext"]["runAsNonRoot"] is True
        assert p["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in p["containers"]:
            ctx = c["securityContext"]
            assert ctx["allowPrivilegeEscalation"] is False
            assert ctx["readOnlyRootFilesystem"] is True
            assert ctx["capabilities"] == {"drop": ["ALL"]}
            _, tag = c["image"].rsplit(":", 1)
            assert tag and tag != "latest", c["image"]
            assert c["resources"]["limits"]["cpu"] == c["resources"]["requests"]["cpu"]
            assert c["resources"]["limits"]["memory"] == c["resources"]["requests"]["memory"]
        assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    namespace = result.one("kubernetes:core/v1:Namespace").inputs["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_standard_pool_selectors_and_gke_driver_path() -> None:
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[{**L4_POOL, "spot": True}], workloads=["nvidia-smi"])
    )
    spec = pod(workload(result, "nvidia-smi-l4"))
    assert spec["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "cloud.google.com/gke-nodepool": "l4",
        "cloud.google.com/gke-spot": "true",
    }
    container = spec["containers"][0]
    # The image's own PATH and LD_LIBRARY_PATH stay (they already name /usr/local/nvidia, where GKE
    # mounts the driver); nvidia-smi is found by appending GKE's driver bin to PATH in the command.
    assert "env" not in container
    assert container["command"] == [
        "sh",
        "-c",
        'PATH="$PATH:/usr/local/nvidia/bin"; nvidia-smi && nvidia-smi -L',
    ]


def test_no_sample_replaces_the_image_path() -> None:
    """pytorch/pytorch keeps python in /opt/conda/bin: a PATH override would hide it."""
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4_POOL],
            workloads=["nvidia-smi", "cuda-vector-add", "pytorch-smoke"],
        )
    )
    for job in result.of_type("kubernetes:batch/v1:Job"):
        for container in pod(job.inputs)["containers"]:
            names = {e["name"] for e in container.get("env", [])}
            assert not names & {"PATH", "LD_LIBRARY_PATH"}, job.name


def test_a_mig_and_time_shared_pool_gets_one_partition_per_pod() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[A100_SHARED], workloads=["pytorch-smoke", "sharing-demo"]
        )
    )
    for name in ("pytorch-smoke-a100", "sharing-demo-a100"):
        spec = pod(workload(result, name))
        assert spec["nodeSelector"]["cloud.google.com/gke-gpu-partition-size"] == "1g.5gb"
        assert spec["nodeSelector"]["cloud.google.com/gke-gpu-sharing-strategy"] == "time-sharing"
        assert spec["nodeSelector"]["cloud.google.com/gke-max-shared-clients-per-gpu"] == "2"
        assert gpu_limits(workload(result, name)) == [("1", "1")]
    demo = workload(result, "sharing-demo-a100")
    assert demo["spec"]["replicas"] == 2
    assert "hostIPC" not in pod(demo)


def test_mps_sharing_demo_uses_host_ipc_in_a_privileged_namespace() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[T4_MPS], workloads=[{"name": "sharing-demo", "replicas": 3}]
        )
    )
    demo = workload(result, "sharing-demo-t4")
    assert demo["spec"]["replicas"] == 3
    assert pod(demo)["hostIPC"] is True
    assert demo["metadata"]["namespace"] == "gpu-samples-mps"
    namespaces = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]
        for r in result.of_type("kubernetes:core/v1:Namespace")
    }
    assert namespaces["gpu-samples-mps"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert namespaces["gpu-samples-mps"]["pod-security.kubernetes.io/warn"] == "restricted"
    assert namespaces["gpu-samples"]["pod-security.kubernetes.io/enforce"] == "restricted", (
        "the others stay restricted"
    )
    assert "-n gpu-samples-mps " in result.outputs["sampleWorkloads"]["sharing-demo-t4"]["logs"]


def test_autopilot_pods_request_the_profile_gpu_count() -> None:
    pools = [{"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 2, "driverVersion": "LATEST"}]
    result = render(stack_config(cluster=AUTOPILOT_CLUSTER, gpuPools=pools, workloads=["pytorch-smoke"]))
    job = workload(result, "pytorch-smoke-h100")
    assert gpu_limits(job) == [("2", "2")]
    assert pod(job)["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
        "cloud.google.com/gke-gpu-driver-version": "latest",
    }


def test_pytorch_script_and_image() -> None:
    pools = [
        L4_POOL,
        {
            "name": "b200",
            "accelerator": "nvidia-b200",
            "gpusPerNode": 8,
            "maxNodes": 1,
            "driverVersion": "LATEST",
        },
    ]
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=pools,
            workloads=["pytorch-smoke", {"name": "pytorch-smoke", "pool": "b200"}],
        )
    )
    script = result.one("kubernetes:core/v1:ConfigMap").inputs["data"]["smoke.py"]
    assert script == PYTORCH_SCRIPT.read_text()
    assert "cuda12" in pod(workload(result, "pytorch-smoke-l4"))["containers"][0]["image"]
    assert "cuda13" in pod(workload(result, "pytorch-smoke-b200"))["containers"][0]["image"], (
        "Blackwell kernels"
    )
    assert pod(workload(result, "pytorch-smoke-l4"))["containers"][0]["command"] == [
        "python",
        "/opt/smoke/smoke.py",
    ]


def test_extra_pool_taints_are_tolerated() -> None:
    pools = [{**L4_POOL, "taints": [{"key": "dedicated", "value": "ml", "effect": "NO_EXECUTE"}]}]
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=pools, workloads=["nvidia-smi"]))
    tolerations = pod(workload(result, "nvidia-smi-l4"))["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"} in tolerations


def test_prod_runs_every_sample_that_fits() -> None:
    result = run_stack("prod")
    names = {
        r.inputs["metadata"]["name"]
        for r in result.resources
        if r.type in ("kubernetes:batch/v1:Job", "kubernetes:apps/v1:Deployment")
    }
    assert names == {
        "nvidia-smi-l4-serving",
        "cuda-vector-add-l4-serving",
        "pytorch-smoke-l4-serving",
        "nvidia-smi-a100-mig",
        "sharing-demo-a100-mig",
    }


def test_sample_outputs_give_wait_and_log_commands() -> None:
    summary = run_stack("dev").outputs["sampleWorkloads"]
    assert (
        summary["nvidia-smi-l4"]["logs"] == "kubectl logs -n gpu-samples job/nvidia-smi-l4 --all-containers"
    )
    assert "--for=condition=complete job/nvidia-smi-l4" in summary["nvidia-smi-l4"]["wait"]


# -- Bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        (
            {
                "cluster": STANDARD_CLUSTER,
                "gpuPools": [L4_POOL],
                "workloads": [{"name": "nvidia-smi", "pool": "a100"}],
            },
            ["gke-gpu:workloads[0].pool", "'a100' is not a GPU pool of this stack", "allowed: l4"],
        ),
        (
            {"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "workloads": ["tensorflow-smoke"]},
            [
                "gke-gpu:workloads[0].name",
                "'tensorflow-smoke'",
                "'nvidia-smi', 'cuda-vector-add', 'pytorch-smoke' or 'sharing-demo'",
            ],
        ),
        (
            {"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "workloads": ["sharing-demo"]},
            ["gke-gpu:workloads[0].pool", "'l4' has no sharing"],
        ),
        (
            {"cluster": STANDARD_CLUSTER, "workloads": ["nvidia-smi"]},
            ["gke-gpu:workloads[0]", "needs a GPU pool, and gke-gpu:gpuPools is empty"],
        ),
        (
            {
                "cluster": STANDARD_CLUSTER,
                "gpuPools": [{**L4_POOL, "queuedProvisioning": True}],
                "workloads": ["nvidia-smi"],
            },
            ["gke-gpu:workloads[0].pool", "uses queued provisioning"],
        ),
        (
            {
                "cluster": STANDARD_CLUSTER,
                "gpuPools": [L4_POOL],
                "workloads": [{"name": "nvidia-smi", "replicas": 2}],
            },
            ["gke-gpu:workloads[0].replicas", "only allowed for sharing-demo"],
        ),
    ],
)
def test_bad_workload_config(raw: dict, fragments: list[str]) -> None:
    message = config_error(raw)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message}"
