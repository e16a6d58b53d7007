"""serving-gpu-limit, serving-on-gpu-pool and serving-weights-read-only: what a model server is, each
rule's compliant and violating servers, unknowns, and the program's own InferenceService.

The workloads here are validated against Kubernetes' schemas (a LeaderWorkerSet against the vendored
LWS v0.10.0 CRD), so the rules read the fields a real object has.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy.gke_gpu_policies import rules, serving
from policy.gke_gpu_policies.servers import is_server_image, server_pods
from policy.tests.factories import (
    DELETE,
    GPU_TOLERATION,
    UNKNOWN_KINDS,
    check,
    cpu_pool,
    gpu_pod_spec,
    gpu_pool,
    one,
    set_path,
    stack_args,
    unknown,
    urn,
    violations,
    workload,
)
from tests.kubernetes_schemas import validate

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
STATEFULSET = "kubernetes:apps/v1:StatefulSet"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
NODE_POOL = "gcp:container/nodePool:NodePool"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
VLLM = "vllm/vllm-openai:v0.33.0"
GCSFUSE = {
    "driver": "gcsfuse.csi.storage.gke.io",
    "readOnly": True,
    "volumeAttributes": {"bucketName": "models", "mountOptions": "only-dir=qwen"},
}
SERVER_LABEL = {"app.kubernetes.io/component": "inference-server"}


def server_pod(**changes: Any) -> dict[str, Any]:
    """A compliant vLLM Pod spec, shaped like InferenceService's: one GPU, the pool's selector and
    toleration, weights from Cloud Storage read-only, scratch space in emptyDirs."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "vllm",
                "image": VLLM,
                "resources": {
                    "limits": {"cpu": "4", "memory": "19Gi", "nvidia.com/gpu": "1"},
                    "requests": {"cpu": "4", "memory": "19Gi", "nvidia.com/gpu": "1"},
                },
                "volumeMounts": [
                    {"name": "home", "mountPath": "/home/vllm"},
                    {"name": "weights", "mountPath": "/models", "readOnly": True},
                ],
            }
        ],
        "nodeSelector": {
            "cloud.google.com/gke-accelerator": "nvidia-l4",
            "cloud.google.com/gke-nodepool": "l4",
        },
        "tolerations": [GPU_TOLERATION],
        "volumes": [{"name": "home", "emptyDir": {"sizeLimit": "50Gi"}}, {"name": "weights", "csi": GCSFUSE}],
    }
    for path, value in changes.items():
        spec = set_path(spec, path, value)
    return spec


def template(pod: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "chat", **(labels or {})}}, "spec": pod}


def deployment(pod: dict[str, Any] | None = None, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "namespace": "serve-chat", "labels": labels or {}},
        "spec": {
            "selector": {"matchLabels": {"app": "chat"}},
            "template": template(pod if pod is not None else server_pod()),
        },
    }


def claim(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "100Gi"}}},
    }


def statefulset(pod: dict[str, Any] | None = None, *, claims: tuple[str, ...] = ()) -> dict[str, Any]:
    props = deployment(pod)
    props["kind"] = "StatefulSet"
    props["spec"]["serviceName"] = "chat"
    if claims:
        props["spec"]["volumeClaimTemplates"] = [claim(c) for c in claims]
    return props


def leader_worker_set(
    leader: dict[str, Any] | None = None,
    worker: dict[str, Any] | None = None,
    *,
    claims: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An LWS of groups of 2 (the LWS project's vLLM example's shape); leader None: no leaderTemplate."""
    group: dict[str, Any] = {"size": 2, "workerTemplate": template(worker or server_pod())}
    if leader is not None:
        group["leaderTemplate"] = template(leader, {"role": "leader"})
    if claims:
        group["volumeClaimTemplates"] = [claim(c) for c in claims]
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "serve-vllm", "labels": labels or {}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": group},
    }


def stack(*servers: tuple[str, dict[str, Any]], pools: list[dict[str, Any]] | None = None) -> Any:
    """The server(s) in a stack with (by default) a tainted GPU pool `l4`."""
    resources = [(NODE_POOL, f"gpu-{p['name']}-pool", p) for p in pools or [gpu_pool(name="l4")]]
    resources += [(t, f"server-{i}", props) for i, (t, props) in enumerate(servers)]
    return stack_args(resources)


def placement(*servers: tuple[str, dict[str, Any]], **kwargs: Any) -> list[str]:
    return violations(serving.validate_serving_on_gpu_pool, stack(*servers, **kwargs))


def gpu_limit(resource_type: str, props: dict[str, Any]) -> list[str]:
    return check(serving.validate_serving_gpu_limit, resource_type, props, name="chat")


def weights(resource_type: str, props: dict[str, Any]) -> list[str]:
    return check(serving.validate_serving_weights_read_only, resource_type, props, name="chat")


# --------------------------------------------------------------------------------------------------
# The pack, the fixtures, what a model server is.


def test_the_pack_serves_the_serving_policies_last() -> None:
    assert rules.POLICIES[-3:] == serving.SERVING_POLICIES
    assert [p.name for p in serving.SERVING_POLICIES] == [
        "serving-gpu-limit",
        "serving-on-gpu-pool",
        "serving-weights-read-only",
    ]


@pytest.mark.parametrize(
    "props",
    [deployment(), statefulset(claims=("cache",)), leader_worker_set(server_pod(), claims=("cache",))],
    ids=["Deployment", "StatefulSet", "LeaderWorkerSet"],
)
def test_the_servers_here_are_valid_kubernetes_objects(props: dict[str, Any]) -> None:
    validate(copy.deepcopy(props))


@pytest.mark.parametrize(
    "image",
    [
        VLLM,
        "docker.io/vllm/vllm-openai:v0.10.0",
        "vllm/vllm-openai@sha256:" + "0" * 64,
        "us-docker.pkg.dev/acme/dockerhub/vllm/vllm-openai:latest",  # a mirror keeps the path
        "nvcr.io/nvidia/vllm:26.02-py3",
        "lmsysorg/sglang:latest",
        "ghcr.io/huggingface/text-generation-inference:3.3.5",
        "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311",
        "nvcr.io/nvidia/tritonserver:26.07-py3",
        "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/pytorch-vllm-serve:20250801_0916_RC01",
    ],
)
def test_known_model_server_images(image: str) -> None:
    assert is_server_image(image)


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/tritonserver:26.07-py3-sdk",  # Triton's client tools
        "vllm/vllm-tpu:latest",  # TPUs, not nvidia.com/gpu
        "vllm/vllm-openai-fork:1",
        "acme/notvllm-openai:1",
        "python:3.13.9-slim-bookworm",
        "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
    ],
)
def test_other_images(image: str) -> None:
    assert not is_server_image(image)


def test_servers_are_deployments_statefulsets_and_both_templates_of_a_leader_worker_set() -> None:
    found = [
        s.subject
        for t, props in [
            (DEPLOYMENT, deployment()),
            (STATEFULSET, statefulset()),
            (LWS, leader_worker_set(server_pod())),
        ]
        for s in server_pods(t, "chat", props)
    ]
    assert found == [
        "Deployment 'chat' (serve-chat/chat)",
        "StatefulSet 'chat' (serve-chat/chat)",
        "LeaderWorkerSet 'chat' (serve-vllm/vllm), leader template",
        "LeaderWorkerSet 'chat' (serve-vllm/vllm), worker template",
    ]
    # Without a leaderTemplate the leader runs the worker template: one template to judge.
    assert len(server_pods(LWS, "chat", leader_worker_set())) == 1


@pytest.mark.parametrize("labels", ["object", "template"])
def test_the_inference_server_label_makes_any_image_a_server(labels: str) -> None:
    pod = server_pod(**{"containers.0.image": "acme/llm-server:1", "containers.0.resources": DELETE})
    props = deployment(pod, labels=SERVER_LABEL if labels == "object" else None)
    if labels == "template":
        props["spec"]["template"]["metadata"]["labels"].update(SERVER_LABEL)
    one(
        gpu_limit(DEPLOYMENT, props),
        "serving-gpu-limit",
        "no container of its Pod has a nvidia.com/gpu limit",
    )


def test_other_workloads_are_not_judged() -> None:
    """A CPU Deployment with a writable claim, and a vLLM Job or Pod (a benchmark client, a download)."""
    cpu = server_pod(
        **{
            "containers.0.image": "nginx:1.27",
            "containers.0.resources": DELETE,
            "containers.0.volumeMounts.1.readOnly": False,
            "volumes.1": {"name": "weights", "persistentVolumeClaim": {"claimName": "models"}},
            "tolerations": DELETE,
            "nodeSelector": DELETE,
        }
    )
    vllm_client = gpu_pod_spec(
        **{"containers.0.image": VLLM, "containers.0.resources": DELETE, "tolerations": []}
    )
    others = [
        (DEPLOYMENT, deployment(cpu)),
        ("kubernetes:batch/v1:Job", workload("kubernetes:batch/v1:Job", vllm_client)),
        ("kubernetes:core/v1:Pod", workload("kubernetes:core/v1:Pod", vllm_client)),
    ]
    for resource_type, props in others:
        assert server_pods(resource_type, "x", props) == []
        assert gpu_limit(resource_type, props) == weights(resource_type, props) == []
    assert placement(*others) == []


# --------------------------------------------------------------------------------------------------
# serving-gpu-limit


@pytest.mark.parametrize(
    ("resource_type", "props"),
    [(DEPLOYMENT, deployment()), (STATEFULSET, statefulset()), (LWS, leader_worker_set(server_pod()))],
)
def test_a_server_with_whole_gpus_complies(resource_type: str, props: dict[str, Any]) -> None:
    assert gpu_limit(resource_type, props) == []
    # Requests may be left out (they default to the limit), and numbers may be integers.
    pod = server_pod(**{"containers.0.resources": {"limits": {"nvidia.com/gpu": 8}}})
    assert gpu_limit(DEPLOYMENT, deployment(pod)) == []


@pytest.mark.parametrize(
    ("resources", "found"),
    [
        (DELETE, "containers[0] 'vllm' has no nvidia.com/gpu limit"),
        ({"limits": {"cpu": "4"}}, "containers[0] 'vllm' has no nvidia.com/gpu limit"),
        (
            {"requests": {"nvidia.com/gpu": "1"}},
            "containers[0] 'vllm' requests '1' nvidia.com/gpu without a limit",
        ),
        ({"limits": {"nvidia.com/gpu": "0"}}, "limit '0', not a whole number of at least 1"),
        ({"limits": {"nvidia.com/gpu": "0.5"}}, "limit '0.5', not a whole number of at least 1"),
        (
            {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}},
            "requests '1' nvidia.com/gpu but its limit is '2'",
        ),
    ],
)
def test_a_server_without_whole_gpus_is_a_violation(resources: Any, found: str) -> None:
    props = deployment(server_pod(**{"containers.0.resources": resources}))
    message = one(gpu_limit(DEPLOYMENT, props), "serving-gpu-limit", found)
    assert message.startswith("Deployment 'chat' (serve-chat/chat): ")


def test_each_template_of_a_leader_worker_set_is_judged() -> None:
    cpu_worker = server_pod(**{"containers.0.resources": {"limits": {"cpu": "8"}}})
    message = one(gpu_limit(LWS, leader_worker_set(server_pod(), cpu_worker)), "serving-gpu-limit")
    assert message.startswith(
        "LeaderWorkerSet 'chat' (serve-vllm/vllm), worker template: containers[0] 'vllm'"
    )


def test_a_server_that_claims_its_gpus_through_dra_complies_and_a_dangling_claim_does_not() -> None:
    dra = {"limits": {"cpu": "4"}, "requests": {"cpu": "4"}, "claims": [{"name": "gpus"}]}
    pod = server_pod(**{"containers.0.resources": dra})
    pod["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpu"}]
    validate(deployment(pod))
    assert gpu_limit(DEPLOYMENT, deployment(pod)) == []
    assert gpu_limit(LWS, leader_worker_set(pod, pod)) == []
    # A container claim the Pod does not make gives it nothing: no GPU, as before.
    del pod["resourceClaims"]
    one(gpu_limit(DEPLOYMENT, deployment(pod)), "serving-gpu-limit", "has no nvidia.com/gpu limit")


def test_with_only_the_label_one_container_with_gpus_is_enough() -> None:
    pod = server_pod(**{"containers.0.image": "acme/llm-server:1"})
    pod["containers"].append({"name": "metrics", "image": "acme/exporter:1"})
    assert gpu_limit(DEPLOYMENT, deployment(pod, labels=SERVER_LABEL)) == []
    # The one that asks for GPUs asks wrongly: that is the problem named.
    bad = set_path(pod, ("containers", "0", "resources", "limits", "nvidia.com/gpu"), "0.5")
    one(gpu_limit(DEPLOYMENT, deployment(bad, labels=SERVER_LABEL)), "serving-gpu-limit", "limit '0.5'")


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_gpu_limit_unknowns_are_not_violations(kind: str) -> None:
    for path in ("containers", "containers.0", "containers.0.resources", "containers.0.resources.limits"):
        assert gpu_limit(DEPLOYMENT, deployment(server_pod(**{path: unknown(kind)}))) == [], path
    limit = ("containers", "0", "resources", "limits", "nvidia.com/gpu")
    assert gpu_limit(DEPLOYMENT, deployment(set_path(server_pod(), limit, unknown(kind)))) == []
    # A label not known yet, with an image that is not a server's: maybe a server, not judged.
    pod = server_pod(**{"containers.0.image": "acme/llm-server:1", "containers.0.resources": DELETE})
    assert gpu_limit(DEPLOYMENT, deployment(pod, labels={"app.kubernetes.io/component": unknown(kind)})) == []


# --------------------------------------------------------------------------------------------------
# serving-on-gpu-pool


def test_a_server_on_a_tainted_gpu_pool_complies() -> None:
    assert placement((DEPLOYMENT, deployment()), (LWS, leader_worker_set(server_pod()))) == []
    # Required node affinity instead of a nodeSelector; a pool of another stack cannot be checked.
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["l4"]}
                        ]
                    },
                    {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]},
                ]
            }
        }
    }
    assert placement((DEPLOYMENT, deployment(server_pod(nodeSelector=DELETE, affinity=affinity)))) == []
    other = server_pod(**{"nodeSelector": {"cloud.google.com/gke-nodepool": "elsewhere"}})
    assert placement((DEPLOYMENT, deployment(other))) == []


def test_a_compute_class_with_gpus_counts_as_a_gpu_pool() -> None:
    gpu_class = {
        "metadata": {"name": "gpu-l4"},
        "spec": {
            "priorities": [{"gpu": {"type": "nvidia-l4", "count": 1}, "spot": True}, {"nodepools": ["l4"]}]
        },
    }
    pod = server_pod(nodeSelector={"cloud.google.com/compute-class": "gpu-l4"})
    resources = [(NODE_POOL, "gpu-l4-pool", gpu_pool(name="l4")), (COMPUTE_CLASS, "gpu-l4-class", gpu_class)]
    resources.append((DEPLOYMENT, "chat", deployment(pod)))
    assert violations(serving.validate_serving_on_gpu_pool, stack_args(resources)) == []
    # A priority without a GPU, and a named pool without the taint.
    cpu_class = set_path(gpu_class, "spec.priorities.0", {"machineFamily": "n2"})
    untainted = gpu_pool(name="l4", **{"nodeConfig.taints": []})
    resources[:2] = [(NODE_POOL, "gpu-l4-pool", untainted), (COMPUTE_CLASS, "gpu-l4-class", cpu_class)]
    found = violations(serving.validate_serving_on_gpu_pool, stack_args(resources))
    assert [m.split(": ", 1)[1].split(", ")[0] for m in found] == [
        "selects ComputeClass 'gpu-l4' (cloud.google.com/compute-class)",
        "runs on node pool 'l4' (cloud.google.com/gke-nodepool)",
    ]
    assert "spec.priorities[0] name(s) no GPU" in found[0] and "has no nvidia.com/gpu:NO_SCHEDULE" in found[1]


def test_a_server_without_the_gpu_toleration_is_a_violation() -> None:
    message = one(placement((DEPLOYMENT, deployment(server_pod(tolerations=DELETE)))), "serving-on-gpu-pool")
    assert message.startswith("Deployment 'server-0' (serve-chat/chat): its Pod spec does not tolerate the ")
    assert "nvidia.com/gpu=present:NoSchedule taint" in message
    # An Equal toleration must match the named pool's own taint value.
    equal = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    pool = gpu_pool(name="l4", **{"nodeConfig.taints.0.value": "true"})
    pod = server_pod(tolerations=[equal])
    one(placement((DEPLOYMENT, deployment(pod)), pools=[pool]), "serving-on-gpu-pool", "nvidia.com/gpu=true")
    assert placement((DEPLOYMENT, deployment(pod))) == []  # the default pool's value is `present`
    # A taint without a value is matched by an Equal toleration without one.
    valueless = gpu_pool(name="l4", **{"nodeConfig.taints.0.value": DELETE})
    bare = server_pod(tolerations=[{k: v for k, v in equal.items() if k != "value"}])
    assert placement((DEPLOYMENT, deployment(bare)), pools=[valueless]) == []
    one(
        placement((DEPLOYMENT, deployment(pod)), pools=[valueless]),
        "serving-on-gpu-pool",
        "the nvidia.com/gpu:NoSchedule taint",
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"nodeSelector": DELETE},
        {"nodeSelector": {"cloud.google.com/gke-spot": "true"}},
        {"nodeSelector": {"cloud.google.com/gke-accelerator": ""}},
        {
            "nodeSelector": DELETE,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}
                                ]
                            },
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                                ]
                            },
                        ]
                    }
                }
            },
        },
    ],
    ids=["no-selector", "spot-only", "empty-accelerator", "one-term-without-gpus"],
)
def test_a_server_that_selects_no_gpu_nodes_is_a_violation(changes: dict[str, Any]) -> None:
    found = placement((DEPLOYMENT, deployment(server_pod(**changes))))
    one(found, "serving-on-gpu-pool", "its Pod selects no GPU nodes", "cloud.google.com/gke-nodepool")


@pytest.mark.parametrize(
    ("pool", "found"),
    [
        (cpu_pool(name="l4"), "runs on node pool 'l4' (cloud.google.com/gke-nodepool), which has no GPUs"),
        (
            gpu_pool(name="l4", **{"nodeConfig.taints": DELETE}),
            "which has no nvidia.com/gpu:NO_SCHEDULE taint",
        ),
        (
            gpu_pool(name="l4", **{"nodeConfig.taints.0.effect": "PREFER_NO_SCHEDULE"}),
            "which has no nvidia.com/gpu:NO_SCHEDULE taint",
        ),
    ],
    ids=["cpu-pool", "no-taint", "prefer-no-schedule"],
)
def test_a_named_pool_that_is_not_a_tainted_gpu_pool_is_a_violation(pool: dict[str, Any], found: str) -> None:
    one(placement((DEPLOYMENT, deployment()), pools=[pool]), "serving-on-gpu-pool", found)


def test_the_violation_is_reported_on_the_server() -> None:
    reported: list[tuple[str, str | None]] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append((message, urn))

    args = stack((DEPLOYMENT, deployment(server_pod(tolerations=[]))))
    serving.validate_serving_on_gpu_pool(args, report)
    assert [u for _, u in reported] == [urn(DEPLOYMENT, "server-0")]


def test_the_taint_value_is_configurable() -> None:
    equal = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    pod = server_pod(tolerations=[equal], nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-l4"})
    args = stack_args([(DEPLOYMENT, "chat", deployment(pod))], config={"taintValue": "true"})
    assert violations(serving.validate_serving_on_gpu_pool, args) == []
    assert len(placement((DEPLOYMENT, deployment(pod)))) == 1


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_placement_unknowns_are_not_violations(kind: str) -> None:
    for changes in (
        {"tolerations": unknown(kind)},
        {"tolerations.0": unknown(kind)},
        {"nodeSelector": unknown(kind)},
        {"nodeSelector": {"cloud.google.com/gke-nodepool": unknown(kind)}},
    ):
        assert placement((DEPLOYMENT, deployment(server_pod(**changes)))) == [], changes
    for pool in (
        gpu_pool(name="l4", **{"nodeConfig.taints": unknown(kind)}),
        gpu_pool(name="l4", **{"nodeConfig.guestAccelerators": unknown(kind), "nodeConfig.taints": []}),
    ):
        assert placement((DEPLOYMENT, deployment()), pools=[pool]) == []


# --------------------------------------------------------------------------------------------------
# serving-weights-read-only


def test_read_only_weights_comply() -> None:
    scratch: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": "chat"}},
        {"name": "token", "secret": {"secretName": "hf"}},
        {
            "name": "info",
            "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
        },
        {"name": "sa", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
        {"name": "tokenizer", "image": {"reference": "acme/tokenizer:1"}},  # always mounted ro
        {"name": "shm"},  # no source: an emptyDir
    ]
    pod = server_pod()
    pod["volumes"] += scratch
    pod["containers"][0]["volumeMounts"] += [
        {"name": v["name"], "mountPath": f"/{v['name']}"} for v in scratch
    ]
    props = deployment(pod)
    validate(copy.deepcopy(props))
    assert weights(DEPLOYMENT, props) == []
    # A claim whose volume forces every mount read-only.
    forced = server_pod(
        **{"volumes.1": {"name": "weights", "persistentVolumeClaim": {"claimName": "m", "readOnly": True}}}
    )
    assert (
        weights(DEPLOYMENT, deployment(set_path(forced, "containers.0.volumeMounts.1.readOnly", DELETE)))
        == []
    )


@pytest.mark.parametrize(
    ("volume", "described"),
    [
        ({"csi": GCSFUSE}, "csi, driver gcsfuse.csi.storage.gke.io"),
        ({"persistentVolumeClaim": {"claimName": "models"}}, "persistentVolumeClaim 'models'"),
        ({"ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}, "ephemeral"),
        ({"hostPath": {"path": "/mnt/models"}}, "hostPath /mnt/models"),
        ({"nfs": {"server": "10.0.0.2", "path": "/models"}}, "nfs"),
    ],
    ids=["csi", "pvc", "ephemeral", "hostPath", "nfs"],
)
@pytest.mark.parametrize("read_only", [DELETE, False])
def test_a_writable_weights_mount_is_a_violation(
    volume: dict[str, Any], described: str, read_only: Any
) -> None:
    pod = server_pod(
        **{"volumes.1": {"name": "weights", **volume}, "containers.0.volumeMounts.1.readOnly": read_only}
    )
    props = deployment(pod)
    validate(copy.deepcopy(props))
    shown = "unset" if read_only is DELETE else "false"
    one(
        weights(DEPLOYMENT, props),
        "serving-weights-read-only",
        f"Deployment 'chat' (serve-chat/chat): containers[0] 'vllm' mounts volume 'weights' ({described}) at "
        f"/models read-write (readOnly {shown})",
    )


@pytest.mark.parametrize("read_only", [DELETE, False])
def test_a_csi_volume_must_itself_be_read_only(read_only: Any) -> None:
    props = deployment(server_pod(**{"volumes.1.csi.readOnly": read_only}))
    shown = "unset" if read_only is DELETE else "false"
    one(
        weights(DEPLOYMENT, props),
        "serving-weights-read-only",
        f"volume 'weights' (csi, driver gcsfuse.csi.storage.gke.io) has csi.readOnly {shown}: set it to true",
    )


def test_every_container_that_mounts_the_weights_mounts_them_read_only() -> None:
    loader = {
        "name": "fetch",
        "image": "google/cloud-sdk:slim",
        "volumeMounts": [{"name": "weights", "mountPath": "/w"}],
    }
    block = {"name": "weights", "devicePath": "/dev/models"}
    pod = server_pod(**{"volumes.1": {"name": "weights", "persistentVolumeClaim": {"claimName": "m"}}})
    pod["initContainers"] = [loader]
    found = weights(DEPLOYMENT, deployment(pod))
    assert found == [
        "Deployment 'chat' (serve-chat/chat): initContainers[0] 'fetch' mounts volume 'weights' "
        "(persistentVolumeClaim 'm') at /w read-write (readOnly unset): set readOnly: true, so a "
        "compromised or faulty container cannot change the weights every replica loads (fill the "
        "volume from a separate Job) [serving-weights-read-only]"
    ]
    raw = set_path(pod, "containers.0.volumeMounts", [pod["containers"][0]["volumeMounts"][0]])
    raw["containers"][0]["volumeDevices"] = [block]
    raw.pop("initContainers")
    validate(deployment(raw))
    one(
        weights(DEPLOYMENT, deployment(raw)),
        "serving-weights-read-only",
        "as a raw block device (volumeDevices)",
    )


def test_volume_claim_templates_hold_weights_too() -> None:
    """A StatefulSet's or LWS's claim, which takes precedence over a volume of the same name."""
    writable = server_pod(
        **{"containers.0.volumeMounts.1.readOnly": DELETE, "volumes.1": {"name": "weights", "emptyDir": {}}}
    )
    one(
        weights(STATEFULSET, statefulset(writable, claims=("weights",))),
        "serving-weights-read-only",
        "a volumeClaimTemplates claim",
    )
    assert weights(STATEFULSET, statefulset(writable)) == []  # an emptyDir is scratch
    found = weights(LWS, leader_worker_set(writable, writable, claims=("weights",)))
    assert [m.split(":")[0] for m in found] == [
        "LeaderWorkerSet 'chat' (serve-vllm/vllm), leader template",
        "LeaderWorkerSet 'chat' (serve-vllm/vllm), worker template",
    ]


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_weights_unknowns_are_not_violations(kind: str) -> None:
    writable = {"containers.0.volumeMounts.1.readOnly": DELETE}
    for changes in (
        {"volumes": unknown(kind), **writable},
        {"volumes.1": unknown(kind), **writable},
        {"volumes.1.csi": unknown(kind), **writable},
        {"containers.0.volumeMounts.1.readOnly": unknown(kind)},
        {"containers.0.volumeMounts": unknown(kind)},
        {"volumes.1.csi.readOnly": unknown(kind)},
    ):
        assert weights(DEPLOYMENT, deployment(server_pod(**changes))) == [], changes


# --------------------------------------------------------------------------------------------------
# The program's own model servers (InferenceService), on each kind of pool it serves from.

SERVED: dict[str, dict[str, Any]] = {
    "standard": {
        "gke-gpu:cluster": {"mode": "standard", "name": "gpu-test"},
        "gke-gpu:gpuPools": [
            {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2, "driverVersion": "LATEST"},
            {
                "name": "ladder",
                "accelerator": "nvidia-l4",
                "maxNodes": 2,
                "driverVersion": "LATEST",
                "capacityLadder": ["onDemand", "spot"],
            },
        ],
        "gke-gpu:serving": [
            {"name": "chat", "pool": "l4", "model": "gs://models/qwen", "server": "vllm"},
            {
                "name": "hf",
                "pool": "ladder",
                "model": "Qwen/Qwen2.5-1.5B-Instruct",
                "server": "vllm",
                "hfTokenSecret": "hf",
            },
        ],
    },
    "autopilot": {
        "gke-gpu:cluster": {"mode": "autopilot", "name": "gpu-test"},
        "gke-gpu:gpuPools": [
            {"name": "l4", "accelerator": "nvidia-l4", "driverVersion": "LATEST"},
            {
                "name": "spot",
                "accelerator": "nvidia-l4",
                "driverVersion": "LATEST",
                "spot": True,
                "onDemandFallback": True,
            },
        ],
        "gke-gpu:serving": [
            {"name": "chat", "pool": "l4", "model": "gs://models/qwen", "server": "vllm"},
            {"name": "spot", "pool": "spot", "model": "gs://models/qwen", "server": "vllm"},
        ],
    },
}


@pytest.mark.parametrize("mode", sorted(SERVED))
def test_the_programs_model_servers_comply(mode: str) -> None:
    """A Standard pool (node pool selector), a capacity ladder and an Autopilot profile with a Spot
    fallback (ComputeClass selector), an Autopilot profile (accelerator selector), a Hugging Face
    model (no weights volume)."""
    from tools import check_policies, plan
    from tools.offline import run_program

    config = {"gcp:project": "test-project", "gcp:region": "us-central1", **SERVED[mode]}
    result = run_program(config, stack="test", preview=True)
    assert result.error is None, result.error
    document = plan.to_document(result)
    servers = [r for r in document["resources"] if server_pods(r["type"], r["name"], r["inputs"])]
    assert len(servers) == 2  # not a vacuous pass
    selectors = {k for r in servers for k in r["inputs"]["spec"]["template"]["spec"]["nodeSelector"]}
    assert "cloud.google.com/compute-class" in selectors
    assert [str(v) for v in check_policies.check_document(document)] == []
