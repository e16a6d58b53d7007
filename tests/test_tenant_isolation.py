"""Teams that cannot reach each other (issue 37): the admission policies, evaluated over the rendered
policies as the API server would (tests/admission_eval.py), refuse what reached another team's GPUs,
NICs or the node, and still admit every Pod the program itself renders."""

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from gke_gpu.gpudirect.admission_cel import DEVICE_POLICY, POD_POLICY
from gke_gpu.gpudirect.admission_networks import NETWORK_POLICY, NIC_CLAIM_POLICY
from gke_gpu.gpudirect.images import APERTURE_DEVICES, TCPXO_RXDM
from tests.admission_eval import Verdict, evaluate
from tests.conftest import render, stack_config, stack_render
from tests.test_g4_second_network import G4, keys
from tests.test_gpudirect_admission import BINDING, POLICY, allreduce_pod, sidecar_of
from tests.test_teams import MEGA, ZONAL
from tools.offline import RunResult

NCCL = "gpu-nccl-train"
SIDECAR_KEY = "devices.gke.io/container.tcpxo-daemon"
GPUS = "".join(f"- path: /dev/nvidia{i}\n" for i in range(8)) + "- path: /dev/dmabuf_import_helper\n"


@pytest.fixture(scope="module")
def train() -> RunResult:
    return stack_render("train")


def policies(result: RunResult) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    bindings = {r.inputs["spec"]["policyName"]: r.inputs["spec"] for r in result.of_type(BINDING)}
    for r in result.of_type(POLICY):
        name = r.inputs["metadata"]["name"]
        yield name, r.inputs["spec"], bindings[name]


def verdict(result: RunResult, name: str, obj: dict[str, Any], namespace: str) -> Verdict:
    (found,) = [(spec, bound) for n, spec, bound in policies(result) if n == name]
    return evaluate(*found, obj, namespace)


def refused(result: RunResult, obj: dict[str, Any], namespace: str, resource: str = "pods") -> list[str]:
    """Every denial of every policy of the render that matches `resource` (CREATE), for `obj` in
    `namespace`."""
    denied = []
    for _, spec, bound in policies(result):
        rules = spec["matchConstraints"]["resourceRules"]
        if any(resource in rule["resources"] and "CREATE" in rule["operations"] for rule in rules):
            denied += evaluate(spec, bound, obj, namespace).denied
    return denied


def pod_templates(result: RunResult) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every Pod template the render declares (Deployments, Jobs, JobSets, LeaderWorkerSets, DaemonSets):
    the resource's name, its namespace and the Pod as the API server sees it."""

    def walk(value: Any) -> Iterator[dict[str, Any]]:
        if isinstance(value, dict):
            spec = value.get("spec")
            if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
                yield {"metadata": copy.deepcopy(value.get("metadata", {})), "spec": copy.deepcopy(spec)}
                return
            for child in value.values():
                yield from walk(child)
        elif isinstance(value, list):
            for child in value:
                yield from walk(child)

    for r in result.resources:
        namespace = (r.inputs.get("metadata") or {}).get("namespace")
        if not namespace:
            continue
        for pod in walk(r.inputs.get("spec")):
            yield r.name, namespace, pod


# --------------------------------------------------------------------------------------------------
# The program's own Pods pass.


@pytest.mark.parametrize("stack", ["train", "nvl72", "dra", "serve"])
def test_every_pod_the_program_renders_is_admitted_by_every_policy_it_renders(stack: str) -> None:
    result = stack_render(stack)
    checked = 0
    for name, namespace, pod in pod_templates(result):
        assert not refused(result, pod, namespace), (name, namespace, refused(result, pod, namespace))
        checked += 1
    assert checked, f"{stack}: no Pod template found"


def test_the_serving_pods_pass_the_cluster_wide_policies_of_a_gpudirect_cluster(train: RunResult) -> None:
    """The serve stack's model servers, load tests and gateway Pods, were they on train's cluster: the
    policies bound to every namespace (device annotations, GPU networks) still admit them."""
    serve = stack_render("serve")
    checked = 0
    for name, namespace, pod in pod_templates(serve):
        assert not refused(train, pod, namespace), (name, namespace, refused(train, pod, namespace))
        checked += 1
    assert checked


def test_the_gpudirect_stacks_render_the_network_policies() -> None:
    """train's TCPXO pool attaches its NICs by multi-networking, nvl72's pools claim theirs (DRANET)."""
    for stack, policy in (("train", NETWORK_POLICY), ("nvl72", NIC_CLAIM_POLICY)):
        names = {name for name, _, _ in policies(stack_render(stack))}
        assert {POD_POLICY, policy} <= names, (stack, names)


def test_the_allreduce_pod_is_admitted_in_its_namespace(train: RunResult) -> None:
    pod = allreduce_pod(train)
    for name in (POD_POLICY, DEVICE_POLICY, NETWORK_POLICY):
        result = verdict(train, name, pod, NCCL)
        assert result.applies and result.admitted, (name, result.denied)


# --------------------------------------------------------------------------------------------------
# M-A: a container named like the sidecar.


def miner(where: str) -> dict[str, Any]:
    """Another team's miner under the sidecar's name, with the sidecar's device annotation and no GPU
    request, in `where` (initContainers as a native sidecar, or containers)."""
    container: dict[str, Any] = {"name": "tcpxo-daemon", "image": "evil.example/miner:1"}
    if where == "initContainers":
        container["restartPolicy"] = "Always"
    spec: dict[str, Any] = {where: [container]}
    if where == "initContainers":
        spec["containers"] = [{"name": "main", "image": "busybox:1.37"}]
    return {"metadata": {"annotations": {SIDECAR_KEY: GPUS}}, "spec": spec}


@pytest.mark.parametrize("where", ["initContainers", "containers"])
@pytest.mark.parametrize("namespace", [NCCL, "gpudirect-research"])
def test_a_container_named_like_the_sidecar_with_another_image_gets_no_devices(
    train: RunResult, where: str, namespace: str
) -> None:
    pod = miner(where)
    devices = verdict(train, DEVICE_POLICY, pod, namespace)
    assert any("names an init container of the Pod that is the pinned" in m for m in devices.denied)
    pods = verdict(train, POD_POLICY, pod, namespace)
    assert any("a container named like the GPUDirect sidecar" in m for m in pods.denied), pods.denied


def test_the_pinned_image_alone_is_not_the_sidecar(train: RunResult) -> None:
    """The pinned image with another command, or as a plain container, is not the pinned sidecar."""
    pod = allreduce_pod(train)
    sidecar_of(pod).pop("restartPolicy")  # an init container that runs once, before the workload
    assert not verdict(train, DEVICE_POLICY, pod, NCCL).admitted
    pod = allreduce_pod(train)
    sidecar = sidecar_of(pod)
    pod["spec"]["initContainers"].remove(sidecar)
    sidecar.pop("restartPolicy")
    pod["spec"]["containers"].append(sidecar)
    assert sidecar["image"].startswith(f"{TCPXO_RXDM}@sha256:")
    assert not verdict(train, DEVICE_POLICY, pod, NCCL).admitted
    result = verdict(train, POD_POLICY, pod, NCCL)
    assert any("a container named like the GPUDirect sidecar" in m for m in result.denied)


def test_the_sidecar_in_spec_containers_still_forbids_ephemeral_containers(train: RunResult) -> None:
    """L2: wherever the sidecar sits, its Pod takes no ephemeral container nor shares its PIDs."""
    pod = allreduce_pod(train)
    sidecar = sidecar_of(pod)
    pod["spec"]["initContainers"].remove(sidecar)
    pod["spec"]["containers"].append(sidecar)
    pod["spec"]["shareProcessNamespace"] = True
    result = verdict(train, POD_POLICY, pod, NCCL)
    assert any("shares no process namespace" in m for m in result.denied), result.denied


# --------------------------------------------------------------------------------------------------
# M-B and L5: the aperture devices and IPC_LOCK per flavour.


def plain_pod(**container: Any) -> dict[str, Any]:
    return {"metadata": {}, "spec": {"containers": [{"name": "app", "image": "busybox:1.37", **container}]}}


@pytest.mark.parametrize("namespace", [NCCL, "gpudirect-research"])
def test_a_plain_container_cannot_mount_the_aperture_devices(train: RunResult, namespace: str) -> None:
    pod = plain_pod(volumeMounts=[{"name": "aperture", "mountPath": "/a"}])
    pod["spec"]["volumes"] = [{"name": "aperture", "hostPath": {"path": APERTURE_DEVICES}}]
    result = verdict(train, POD_POLICY, pod, namespace)
    assert any("aperture devices only beside the pinned TCPXO sidecar" in m for m in result.denied)
    # Read-only changes nothing: the devices' PCI files are still there to read.
    pod["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = True
    assert not verdict(train, POD_POLICY, pod, namespace).admitted


def test_the_aperture_devices_beside_the_pinned_sidecar_only(train: RunResult) -> None:
    pod = allreduce_pod(train)
    assert verdict(train, POD_POLICY, pod, NCCL).admitted
    sidecar_of(pod)["image"] = "evil.example/rxdm:1"
    result = verdict(train, POD_POLICY, pod, NCCL)
    assert any("aperture devices only beside the pinned TCPXO sidecar" in m for m in result.denied)


def test_no_aperture_devices_and_no_ipc_lock_on_a_cluster_without_their_flavour() -> None:
    """An RDMA-only cluster (A3 Ultra): no host path of TCPXO's, and no IPC_LOCK for any Pod."""
    from gke_gpu.gpudirect.admission_cel import binding, pod_policy
    from gke_gpu.gpudirect.flavors import GpuDirectFlavor

    spec = pod_policy([GpuDirectFlavor.RDMA])
    pod = plain_pod(volumeMounts=[{"name": "aperture", "mountPath": "/a", "readOnly": True}])
    pod["spec"]["volumes"] = [{"name": "aperture", "hostPath": {"path": APERTURE_DEVICES}}]
    result = evaluate(spec, binding(POD_POLICY, ["ns"]), pod, "ns")
    assert any(m.startswith("hostPath volumes are allowed only") for m in result.denied)
    ipc = plain_pod(securityContext={"capabilities": {"add": ["IPC_LOCK"]}})
    assert not evaluate(spec, binding(POD_POLICY, ["ns"]), ipc, "ns").admitted


def test_ipc_lock_on_a4x_max_only_on_pods_pinned_to_its_machines() -> None:
    from gke_gpu.gpudirect.admission_cel import binding, pod_policy
    from gke_gpu.gpudirect.flavors import GpuDirectFlavor

    spec = pod_policy([GpuDirectFlavor.RDMA_A4X_MAX])
    ipc = plain_pod(securityContext={"capabilities": {"add": ["IPC_LOCK"]}})
    assert not evaluate(spec, binding(POD_POLICY, ["ns"]), ipc, "ns").admitted
    ipc["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-gb300"}
    assert evaluate(spec, binding(POD_POLICY, ["ns"]), ipc, "ns").admitted


# --------------------------------------------------------------------------------------------------
# L1: probes and lifecycle handlers with a host.


@pytest.mark.parametrize(
    "field",
    [
        {"livenessProbe": {"httpGet": {"host": "169.254.169.254", "path": "/", "port": 80}}},
        {"readinessProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 22}}},
        {"startupProbe": {"httpGet": {"host": "metadata.google.internal", "port": 80}}},
        {"lifecycle": {"postStart": {"httpGet": {"host": "169.254.169.254", "port": 80}}}},
        {"lifecycle": {"preStop": {"tcpSocket": {"host": "10.0.0.1", "port": 22}}}},
    ],
)
@pytest.mark.parametrize("namespace", ["research", "gpudirect-research", NCCL])
def test_a_probe_or_lifecycle_handler_with_a_host_is_refused(
    train: RunResult, field: dict[str, Any], namespace: str
) -> None:
    result = verdict(train, POD_POLICY, plain_pod(**field), namespace)
    assert "a probe or lifecycle handler may not set a host (httpGet.host, tcpSocket.host)" in result.denied


def test_a_probe_without_a_host_is_admitted(train: RunResult) -> None:
    pod = plain_pod(livenessProbe={"httpGet": {"path": "/healthz", "port": 8080}})
    assert verdict(train, POD_POLICY, pod, "research").admitted


# --------------------------------------------------------------------------------------------------
# M-C: the GPU networks.


def attaching(*networks: str, text: str | None = None) -> dict[str, Any]:
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"eth{i}", "network": n} for i, n in enumerate(networks, 1)
    ]
    value = text if text is not None else json.dumps(interfaces)
    return {
        "metadata": {"annotations": {"networking.gke.io/interfaces": value}},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]},
    }


@pytest.mark.parametrize("namespace", ["research", "platform", "default", "serve-chat"])
def test_a_pod_outside_the_gpudirect_namespaces_cannot_attach_a_gpu_network(
    train: RunResult, namespace: str
) -> None:
    result = verdict(train, NETWORK_POLICY, attaching("tcpxo-3"), namespace)
    assert result.applies and any("may be attached" in m for m in result.denied), result.denied


def test_only_the_namespaces_of_teams_with_quota_on_the_pool_attach_its_networks() -> None:
    """Two teams, two TCPXO pools: each team's GPUDirect namespace attaches the networks of its own
    pool's flavour only; a team with quota on no TCPXO pool attaches none."""
    other = {**MEGA, "name": "other"}
    l4 = {"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 1, "maxNodes": 2}
    batch = {
        "kueue": True,
        "teams": [
            {"name": "research", "pools": {"train": {"gpus": 8}}},
            {"name": "serving", "pools": {"l4": {"gpus": 1}}},
        ],
    }
    result = render(stack_config(cluster=ZONAL, gpuPools=[MEGA, other, l4], batch=batch))
    assert verdict(result, NETWORK_POLICY, attaching("tcpxo-1", "tcpxo-8"), "gpudirect-research").admitted
    assert not verdict(result, NETWORK_POLICY, attaching("tcpxo-1"), "serving").admitted
    assert not verdict(result, NETWORK_POLICY, attaching("tcpxo-1"), "research").admitted


@pytest.mark.parametrize(
    "text",
    [
        '[{"interfaceName":"eth1","network":"tcpxo\\u002d1"}]',  # a JSON escape GKE would decode
        '[{"interfaceName":"eth1","NETWORK":"tcpxo-1"}]',  # Go's JSON matches keys without case
        '[{"interfaceName": "eth1", "network" : "tcpxo-1"}]',
    ],
)
def test_the_annotation_is_read_however_it_is_written(train: RunResult, text: str) -> None:
    assert not verdict(train, NETWORK_POLICY, attaching(text=text), "research").admitted


def test_a_pod_naming_no_gpu_network_is_not_concerned(train: RunResult) -> None:
    assert verdict(train, NETWORK_POLICY, attaching("my-own-network"), "research").admitted
    assert not verdict(train, NETWORK_POLICY, plain_pod(), "research").applies


def test_g4s_second_network_only_in_the_namespaces_of_teams_on_a_g4_pool() -> None:
    g4 = {**G4, "secondNetwork": True}
    l4 = {"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 1, "maxNodes": 2}
    batch = {
        "kueue": True,
        "teams": [
            {"name": "render", "pools": {"g4": {"gpus": 8}}},
            {"name": "chat", "pools": {"l4": {"gpus": 1}}},
        ],
    }
    result = render(stack_config(**keys(g4, l4), batch=batch))
    assert verdict(result, NETWORK_POLICY, attaching("g4-gvnic-1"), "render").admitted
    assert not verdict(result, NETWORK_POLICY, attaching("g4-gvnic-1"), "chat").admitted


def test_dranet_nic_claims_only_in_the_namespaces_of_teams_on_a_dranet_pool() -> None:
    result = stack_render("nvl72")
    ((spec, bound),) = [(s, b) for n, s, b in policies(result) if n == NIC_CLAIM_POLICY]
    claim = {
        "kind": "ResourceClaimTemplate",
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "mrdma.google.com"}}]}
            }
        },
    }
    assert not evaluate(spec, bound, claim, "some-team").admitted
    gpus = copy.deepcopy(claim)
    gpus["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.nvidia.com"
    assert evaluate(spec, bound, gpus, "some-team").admitted


def test_the_programs_own_dranet_claim_templates_are_admitted() -> None:
    for stack in ("nvl72", "dra", "train"):
        result = stack_render(stack)
        templates = [
            r.inputs
            for r in result.resources
            if r.type == "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
        ]
        for template in templates:
            obj = {"kind": "ResourceClaimTemplate", **template}
            namespace = template["metadata"]["namespace"]
            assert not refused(result, obj, namespace, "resourceclaimtemplates"), (
                stack,
                template["metadata"],
            )
