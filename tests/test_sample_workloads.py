"""Sample GPU workloads: each is a bounded Job that lands on its pool and asks for GPUs the pool can
give. (Hardening and network policy: tests/test_sample_security.py; the sharing demo's script:
tests/test_sharing_demo_script.py.)"""

from __future__ import annotations

import hashlib

import pytest

from gke_gpu.workloads import samples as sample_workloads
from gke_gpu.workloads.samples import PYTORCH_SMOKE_SCRIPT, SCRIPTS, SHARING_DEMO_SCRIPT
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    config_error,
    render,
    stack_config,
    stack_render,
)

JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
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
EVERY_SAMPLE = stack_config(
    cluster=STANDARD_CLUSTER,
    gpuPools=[L4_POOL, A100_SHARED, T4_MPS],
    workloads=[
        "nvidia-smi",
        "cuda-vector-add",
        "pytorch-smoke",
        {"name": "sharing-demo", "pool": "a100"},
        {"name": "sharing-demo", "pool": "t4"},
    ],
)


def workload(result, name: str) -> dict:
    matches = [r.inputs for r in result.of_type(JOB) if r.inputs["metadata"]["name"] == name]
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
    result = stack_render("dev")
    for name in ("nvidia-smi-l4", "cuda-vector-add-l4"):
        spec = pod(workload(result, name))
        assert spec["nodeSelector"] == {"cloud.google.com/compute-class": "gpu-l4"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        assert gpu_limits(workload(result, name)) == [("1", "1")]


@pytest.mark.parametrize("source", ["every sample", "prod", "onprem"])
def test_every_sample_is_a_bounded_job(source: str) -> None:
    """No sample keeps a GPU node up: each is a Job that ends (deadline), is retried at most once
    (Spot preemptions aside) and is deleted a day later; `pulumi up` does not wait for it."""
    result = render(EVERY_SAMPLE) if source == "every sample" else stack_render(source)
    assert result.of_type(DEPLOYMENT) == [], "a Deployment runs (and holds its GPU node) until deleted"
    jobs = [r.inputs for r in result.of_type(JOB)]
    assert len(jobs) == len(result.outputs["sampleWorkloads"])
    for job in jobs:
        spec = job["spec"]
        assert spec["backoffLimit"] == 1
        assert spec["activeDeadlineSeconds"] == 3600
        assert spec["ttlSecondsAfterFinished"] == 86400
        assert spec["podFailurePolicy"] == {
            "rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
            ]
        }
        assert pod(job)["restartPolicy"] == "Never"
        assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_prod_sharing_demo_is_a_job_of_clients_on_the_mig_pool() -> None:
    """Prod's sharing demo used to be a Deployment that kept an A100 node up for good."""
    result = stack_render("prod")
    demo = workload(result, "sharing-demo-a100-mig")
    spec = demo["spec"]
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (2, 2, "Indexed")
    (container,) = pod(demo)["containers"]
    assert container["command"] == ["sh", "-c", SHARING_DEMO_SCRIPT]
    assert container["image"].startswith("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-")
    env = {e["name"]: e for e in container["env"]}
    assert env["SHARING_DEMO_SECONDS"]["value"] == "60"
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert gpu_limits(demo) == [("1", "1")]


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
    assert {e["name"] for e in container["env"]} == {"HOME", "CUDA_CACHE_PATH"}
    assert container["command"] == [
        "sh",
        "-c",
        'PATH="$PATH:/usr/local/nvidia/bin"; nvidia-smi && nvidia-smi -L',
    ]


def test_no_sample_replaces_the_image_path() -> None:
    """pytorch/pytorch keeps python in /opt/conda/bin: a PATH override would hide it."""
    result = render(EVERY_SAMPLE)
    for job in result.of_type(JOB):
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
    assert demo["spec"]["parallelism"] == demo["spec"]["completions"] == 2, "one Pod per client"
    assert "hostIPC" not in pod(demo)


def test_mps_sharing_demo_uses_host_ipc_in_a_privileged_namespace() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[T4_MPS], workloads=[{"name": "sharing-demo", "replicas": 3}]
        )
    )
    demo = workload(result, "sharing-demo-t4")
    assert demo["spec"]["parallelism"] == demo["spec"]["completions"] == 3
    assert pod(demo)["hostIPC"] is True
    assert demo["metadata"]["namespace"] == "gpu-samples-mps"
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


def test_pytorch_script_ships_in_a_config_map_and_runs_as_a_file() -> None:
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
    config_map = result.one("kubernetes:core/v1:ConfigMap").inputs
    assert config_map["metadata"]["name"] == "pytorch-smoke-script"
    assert config_map["data"] == {"smoke.py": (SCRIPTS / "pytorch_smoke.py").read_text()}
    assert "\n" in config_map["data"]["smoke.py"], "the script as code, not one escaped line"
    job = workload(result, "pytorch-smoke-l4")
    (container,) = pod(job)["containers"]
    assert container["command"] == ["python", "/opt/smoke/smoke.py"]
    assert {"name": "script", "mountPath": "/opt/smoke", "readOnly": True} in container["volumeMounts"]
    assert {"name": "script", "configMap": {"name": "pytorch-smoke-script"}} in pod(job)["volumes"]
    assert "cuda12" in container["image"]
    assert "cuda13" in pod(workload(result, "pytorch-smoke-b200"))["containers"][0]["image"], (
        "Blackwell kernels"
    )


def test_a_changed_pytorch_script_replaces_its_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Job's Pods never see a new ConfigMap (the Job has finished): the script's hash in the Pod
    template makes a change replace the Job, so the new script runs."""
    config = stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], workloads=["pytorch-smoke"])

    def annotation() -> str:
        job = workload(render(config), "pytorch-smoke-l4")
        return job["spec"]["template"]["metadata"]["annotations"]["gke-gpu/script-sha256"]

    assert annotation() == hashlib.sha256(PYTORCH_SMOKE_SCRIPT.encode()).hexdigest()
    monkeypatch.setattr(sample_workloads, "PYTORCH_SMOKE_SCRIPT", PYTORCH_SMOKE_SCRIPT + "\n# changed\n")
    assert annotation() == hashlib.sha256((PYTORCH_SMOKE_SCRIPT + "\n# changed\n").encode()).hexdigest()


def test_extra_pool_taints_are_tolerated() -> None:
    pools = [{**L4_POOL, "taints": [{"key": "dedicated", "value": "ml", "effect": "NO_EXECUTE"}]}]
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=pools, workloads=["nvidia-smi"]))
    tolerations = pod(workload(result, "nvidia-smi-l4"))["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"} in tolerations


def test_amd64_only_images_select_amd64_where_the_target_leaves_the_architecture_open() -> None:
    """pytorch/pytorch publishes amd64 only: on an existing cluster (GPU nodes of any architecture)
    the PyTorch Pod selects amd64 nodes; the multi-arch CUDA samples do not. A GKE pool's
    architecture follows from its accelerator, so its selectors stay the pool's."""
    existing = stack_render("onprem")
    assert pod(workload(existing, "pytorch-smoke-gpu-nodes"))["nodeSelector"]["kubernetes.io/arch"] == "amd64"
    for name in ("nvidia-smi-gpu-nodes", "cuda-vector-add-gpu-nodes", "sharing-demo-gpu-nodes"):
        assert "kubernetes.io/arch" not in pod(workload(existing, name))["nodeSelector"], name
    gke = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], workloads=["pytorch-smoke"]))
    assert "kubernetes.io/arch" not in pod(workload(gke, "pytorch-smoke-l4"))["nodeSelector"]


def test_prod_runs_every_sample_that_fits() -> None:
    result = stack_render("prod")
    names = {r.inputs["metadata"]["name"] for r in result.of_type(JOB)}
    assert names == {
        "nvidia-smi-l4-serving",
        "cuda-vector-add-l4-serving",
        "pytorch-smoke-l4-serving",
        "nvidia-smi-a100-mig",
        "sharing-demo-a100-mig",
    }


def test_sample_outputs_give_wait_and_log_commands() -> None:
    summary = stack_render("dev").outputs["sampleWorkloads"]
    assert (
        summary["nvidia-smi-l4"]["logs"] == "kubectl logs -n gpu-samples job/nvidia-smi-l4 --all-containers"
    )
    assert "--for=condition=complete job/nvidia-smi-l4" in summary["nvidia-smi-l4"]["wait"]
    demo = stack_render("prod").outputs["sampleWorkloads"]["sharing-demo-a100-mig"]
    assert demo["wait"] == (
        "kubectl wait -n gpu-samples --for=condition=complete job/sharing-demo-a100-mig --timeout=30m"
    )
    # Every client's log (`kubectl logs job/...` shows one Pod; a selector alone shows 10 lines).
    assert demo["logs"] == (
        "kubectl logs -n gpu-samples -l app.kubernetes.io/instance=sharing-demo-a100-mig "
        "--all-containers --prefix --tail=-1"
    )


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
                "'nvidia-smi', 'cuda-vector-add', 'pytorch-smoke', 'sharing-demo', 'nccl-allreduce' or "
                "'serving-load'",
            ],
        ),
        (
            {"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "workloads": ["sharing-demo"]},
            ["gke-gpu:workloads[0].pool", "'l4' has no sharing"],
        ),
        (
            {"cluster": STANDARD_CLUSTER, "workloads": ["nvidia-smi"]},
            ["gke-gpu:workloads: nvidia-smi needs a GPU pool, and gke-gpu:gpuPools is empty"],
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
