"""Every Kubernetes object the program can declare is valid against the Kubernetes OpenAPI schemas
(built-in kinds) or the CRD shape schemas, in every stack file and in configurations the stack files
do not cover."""

from __future__ import annotations

import copy
import functools

import pytest

from tests.conftest import AUTOPILOT_CLUSTER, STANDARD_CLUSTER, render, stack_config, stack_render
from tests.kubernetes_schemas import validate
from tools.offline import stacks
from tools.plan import kubernetes_objects, to_document

ALL_SAMPLES = ["nvidia-smi", "cuda-vector-add", "pytorch-smoke"]

EXTRA_CONFIGS = {
    "standard, exporter, MPS and MIG pools, every sample": stack_config(
        cluster=STANDARD_CLUSTER,
        gpuPools=[
            {
                "name": "l4",
                "accelerator": "nvidia-l4",
                "maxNodes": 2,
                "spot": True,
                "taints": [{"key": "team", "value": "ml", "effect": "NO_SCHEDULE"}],
            },
            {
                "name": "t4-mps",
                "accelerator": "nvidia-tesla-t4",
                "maxNodes": 1,
                "sharing": {"strategy": "MPS", "maxClientsPerGpu": 4},
            },
            {
                "name": "h100-mig",
                "accelerator": "nvidia-h100-80gb",
                "gpusPerNode": 8,
                "maxNodes": 1,
                "migPartitionSize": "1g.10gb",
            },
        ],
        monitoring={"dcgm": "exporter"},
        workloads=[
            *ALL_SAMPLES,
            {"name": "sharing-demo", "pool": "t4-mps"},
            {"name": "pytorch-smoke", "pool": "h100-mig"},
        ],
    ),
    "standard, GPUDirect RDMA and queued TCPX pools, Kueue, two all-reduces": stack_config(
        cluster=STANDARD_CLUSTER,
        gpuPools=[
            {
                "name": "ultra",
                "accelerator": "nvidia-h200-141gb",
                "gpusPerNode": 8,
                "maxNodes": 4,
                "zones": ["us-central1-b"],
                "gpudirect": True,
                "compactPlacement": True,
            },
            {
                "name": "high",
                "accelerator": "nvidia-h100-80gb",
                "gpusPerNode": 8,
                "maxNodes": 2,
                "zones": ["us-central1-a"],
                "gpudirect": True,
                "queuedProvisioning": True,
            },
        ],
        batch={"kueue": True},
        workloads=[
            {"name": "nccl-allreduce", "pool": "ultra", "nodes": 4},
            {"name": "nccl-allreduce", "pool": "high"},
        ],
    ),
    "standard, a service on Hyperdisk ML beside one on Cloud Storage FUSE": stack_config(
        cluster=STANDARD_CLUSTER,
        gpuPools=[{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2, "driverVersion": "LATEST"}],
        serving=[
            {
                "name": "chat",
                "pool": "l4",
                "model": "gs://models-bucket/qwen2.5-1.5b-instruct",
                "weights": {"via": "hyperdiskMl", "sizeGib": 50},
            },
            {"name": "code", "pool": "l4", "model": "gs://models-bucket/qwen2.5-coder-1.5b"},
        ],
    ),
    "autopilot, time-shared profile, every sample": stack_config(
        cluster=AUTOPILOT_CLUSTER,
        gpuPools=[
            {
                "name": "l4",
                "accelerator": "nvidia-l4",
                "spot": True,
                "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 3},
            },
            {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 2, "driverVersion": "LATEST"},
        ],
        workloads=[
            *ALL_SAMPLES,
            {"name": "sharing-demo", "replicas": 3},
            {"name": "pytorch-smoke", "pool": "h100"},
        ],
    ),
}


def _objects(result):
    """The render's objects; a server-side apply patch (`*Patch`) as the object it changes: the
    patch's fields over the least a valid object of its kind needs (what the patch does not set is the
    patched object's, outside the render)."""
    assert result.error is None, result.error
    document = to_document(result)
    patches = [r for r in document["resources"] if r["type"].endswith("Patch") and not r["component"]]
    whole = {**document, "resources": [r for r in document["resources"] if r not in patches]}
    objects = kubernetes_objects(whole)
    for patch in kubernetes_objects({**document, "resources": patches}):
        objects.append(_merge(_least(patch), patch))
    return objects


def _least(patch: dict) -> dict:
    """The least valid object of the patch's kind, with the patch's containers named."""
    if patch["kind"] != "Deployment":
        return {}
    pod = patch["spec"]["template"]["spec"]
    return {
        "spec": {
            "selector": {"matchLabels": {"app": "patched"}},
            "template": {
                "metadata": {"labels": {"app": "patched"}},
                "spec": {"containers": [{"name": c["name"], "image": "patched"} for c in pod["containers"]]},
            },
        }
    }


def _merge(base, patch):
    """Server-side apply's merge, as far as these objects need: maps key by key, lists of named items
    by name, anything else replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        return {**base, **{k: _merge(base[k], v) if k in base else v for k, v in patch.items()}}
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(i, dict) and "name" in i for i in base + patch)
    ):
        merged = {i["name"]: i for i in base}
        for item in patch:
            merged[item["name"]] = _merge(merged[item["name"]], item) if item["name"] in merged else item
        return list(merged.values())
    return patch


def stack_objects(stack: str) -> list:
    """A stack file's objects (stack_render renders each stack once per process, a copy each time)."""
    return _objects(stack_render(stack))


# Each configuration is rendered once per test process, as the stacks are; the tests get copies
# (the typo test edits its objects).
@functools.cache
def _config_objects(case: str) -> list:
    return _objects(render(EXTRA_CONFIGS[case]))


def config_objects(case: str) -> list:
    return copy.deepcopy(_config_objects(case))


@pytest.mark.parametrize("stack", stacks())
def test_stack_objects_are_schema_valid(stack: str) -> None:
    objects = stack_objects(stack)
    for obj in objects:
        validate(obj)


@pytest.mark.parametrize("case", sorted(EXTRA_CONFIGS))
def test_other_configurations_are_schema_valid(case: str) -> None:
    objects = config_objects(case)
    assert len(objects) >= 5
    for obj in objects:
        validate(obj)


def test_the_validator_catches_a_typo() -> None:
    """Guards the guard: a misspelt field must fail, for built-in kinds and for CRDs."""
    objects = config_objects("standard, exporter, MPS and MIG pools, every sample")
    job = next(o for o in objects if o["kind"] == "Job")
    job["spec"]["backofLimit"] = 1
    with pytest.raises(AssertionError, match="backofLimit"):
        validate(job)
    monitor = next(o for o in objects if o["kind"] == "PodMonitoring")
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(AssertionError):
        validate(monitor)


def test_every_object_has_the_recommended_labels() -> None:
    for case in EXTRA_CONFIGS:
        for obj in config_objects(case):
            labels = obj["metadata"].get("labels", {})
            for key in (
                "app.kubernetes.io/name",
                "app.kubernetes.io/part-of",
                "app.kubernetes.io/managed-by",
            ):
                assert key in labels, f"{obj['kind']} {obj['metadata']['name']} lacks {key}"


def test_the_sample_and_node_objects_are_among_those_validated() -> None:
    """Guards the coverage: the samples' Jobs, their namespace, deny-all policy and script, and the
    generic cluster's node patches are all in the stack files or configurations validated above."""
    kinds = {o["kind"] for stack in stacks() for o in stack_objects(stack)}
    kinds |= {o["kind"] for case in EXTRA_CONFIGS for o in _config_objects(case)}
    assert {"Job", "Namespace", "NetworkPolicy", "ConfigMap", "Node"} <= kinds
    scale_out = {"JobSet", "LocalQueue", "ClusterQueue", "ResourceFlavor", "AdmissionCheck"}
    assert scale_out | {"ProvisioningRequestConfig", "GKENetworkParamSet", "Network", "DaemonSet"} <= kinds
    assert {"StorageClass", "PersistentVolumeClaim", "GCPDataSource", "ComputeClass"} <= kinds
