"""The samples are secure by default: 'restricted' Pods as a high uid with a read-only root
filesystem and bounded resources, in namespaces that enforce Pod Security and deny all traffic."""

from __future__ import annotations

import posixpath

import pytest

from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, render, stack_config, stack_render
from tests.test_sample_workloads import EVERY_SAMPLE, JOB, pod

AUTOPILOT_SAMPLES = stack_config(
    cluster=AUTOPILOT_CLUSTER,
    gpuPools=[
        {
            "name": "l4",
            "accelerator": "nvidia-l4",
            "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2},
        }
    ],
    workloads=["nvidia-smi", "cuda-vector-add", "pytorch-smoke", "sharing-demo"],
)
SOURCES = {
    "standard, every sample": lambda: render(EVERY_SAMPLE),
    "autopilot, every sample": lambda: render(AUTOPILOT_SAMPLES),
    "onprem (generic cluster)": lambda: stack_render("onprem"),
}
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "fsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _under(path: str, directory: str) -> bool:
    return posixpath.commonpath([posixpath.normpath(path), directory]) == directory


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_sample_pods_are_restricted_and_run_as_a_high_uid(source: str) -> None:
    result = SOURCES[source]()
    jobs = result.of_type(JOB)
    assert len(jobs) >= 4
    for job in jobs:
        spec = pod(job.inputs)
        assert spec["securityContext"] == POD_SECURITY, job.name
        assert spec["automountServiceAccountToken"] is False
        assert spec["enableServiceLinks"] is False
        assert not {"hostNetwork", "hostPID"} & set(spec), job.name
        assert all("hostPath" not in v for v in spec["volumes"]), job.name
        for container in spec["containers"]:
            assert container["securityContext"] == CONTAINER_SECURITY, job.name


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_writable_path_is_a_bounded_scratch_volume(source: str) -> None:
    """The root filesystem is read-only; HOME and every cache the samples' tools write (CUDA's JIT
    cache, PyTorch's, Triton's) point into an emptyDir with a size limit."""
    for job in SOURCES[source]().of_type(JOB):
        spec = pod(job.inputs)
        scratch = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        assert all(v["emptyDir"]["sizeLimit"] for v in spec["volumes"] if "emptyDir" in v)
        for container in spec["containers"]:
            writable = [m["mountPath"] for m in container["volumeMounts"] if m["name"] in scratch]
            assert writable == ["/tmp"], job.name
            read_only = [m for m in container["volumeMounts"] if m["name"] not in scratch]
            assert all(m.get("readOnly") for m in read_only), job.name
            env = {e["name"]: e.get("value") for e in container["env"]}
            for name in ("HOME", "CUDA_CACHE_PATH", "TORCH_HOME", "TRITON_CACHE_DIR", "XDG_CACHE_HOME"):
                if name in env:
                    assert _under(env[name], "/tmp"), (job.name, name)
            assert "HOME" in env and "CUDA_CACHE_PATH" in env, job.name
            if container["image"].startswith("pytorch/pytorch:"):
                assert {"TORCH_HOME", "TRITON_CACHE_DIR", "XDG_CACHE_HOME"} <= set(env), job.name
                assert env["PYTHONDONTWRITEBYTECODE"] == "1"


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_sample_containers_have_bounded_cpu_and_memory_and_pinned_images(source: str) -> None:
    for job in SOURCES[source]().of_type(JOB):
        for container in pod(job.inputs)["containers"]:
            resources = container["resources"]
            for key in ("cpu", "memory", "nvidia.com/gpu"):
                assert resources["limits"][key] == resources["requests"][key], (job.name, key)
            name, _, tag = container["image"].rpartition(":")
            assert name and "/" not in tag and tag not in ("", "latest"), container["image"]
            assert container["imagePullPolicy"] == "IfNotPresent"


def _policies(result) -> dict[str, dict]:
    return {
        r.inputs["metadata"]["namespace"]: r.inputs
        for r in result.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }


def _namespaces(result) -> dict[str, dict]:
    return {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]
        for r in result.of_type("kubernetes:core/v1:Namespace")
    }


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_samples_namespace_denies_all_traffic(source: str) -> None:
    """The samples need no network (the kubelet pulls their images): every Pod of every samples
    namespace is selected, with no ingress and no egress rule."""
    result = SOURCES[source]()
    policies = _policies(result)
    namespaces = {r.inputs["metadata"]["namespace"] for r in result.of_type(JOB)}
    assert namespaces and namespaces <= set(policies)
    for namespace in namespaces:
        policy = policies[namespace]
        assert policy["metadata"]["name"] == "deny-all"
        assert policy["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_the_samples_namespace_enforces_restricted_and_mps_is_audited() -> None:
    result = render(EVERY_SAMPLE)
    labels = _namespaces(result)
    assert {k: v for k, v in labels["gpu-samples"].items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }
    # MPS clients need hostIPC (the node's MPS control daemon), which only 'privileged' allows; what
    # breaks 'restricted' there is still warned about and audited.
    assert {k: v for k, v in labels["gpu-samples-mps"].items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }
    privileged = {r.inputs["metadata"]["name"] for r in result.of_type(JOB) if pod(r.inputs).get("hostIPC")}
    assert privileged == {"sharing-demo-t4"}, "only the MPS demo leaves the restricted namespace"
    assert set(_policies(result)) == {"gpu-samples", "gpu-samples-mps"}


def test_without_mps_there_is_one_restricted_namespace() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], workloads=["nvidia-smi"]))
    assert list(_namespaces(result)) == ["gpu-samples"]
    assert list(_policies(result)) == ["gpu-samples"]
