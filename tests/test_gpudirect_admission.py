"""Teams share GPU nodes, not the node: the admission policies that confine GPUDirect's privilege,
evaluated as the API server would (their CEL run by a CEL engine from PyPI, tests/admission_eval.py)
over the Pods the program renders, and the team namespaces' Pod Security levels."""

import copy
from typing import Any

import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpu.scheduling import ACCELERATOR_LABEL
from gke_gpu.gpudirect.admission import GpuDirectAdmission
from gke_gpu.gpudirect.admission_cel import DEVICE_POLICY, POD_POLICY, SIDECAR_EXEC_POLICY
from gke_gpu.gpudirect.admission_networks import NETWORK_POLICY
from gke_gpu.gpudirect.flavors import FLAVORS, GpuDirectFlavor
from gke_gpu.gpudirect.pod_parts import gpudirect_pod_parts
from tests.admission_eval import Verdict, evaluate
from tests.conftest import config_error, render, stack_config, stack_render
from tests.test_teams import MEGA, ZONAL
from tools.offline import RunResult

POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
NAMESPACE = "kubernetes:core/v1:Namespace"
NCCL = "gpu-nccl-train"
SIDECAR_KEY = "devices.gke.io/container.tcpxo-daemon"


@pytest.fixture(scope="module")
def train() -> RunResult:
    return stack_render("train")


def policy(result: RunResult, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (found,) = [r.inputs for r in result.of_type(POLICY) if r.inputs["metadata"]["name"] == name]
    (bound,) = [r.inputs for r in result.of_type(BINDING) if r.inputs["spec"]["policyName"] == name]
    return found["spec"], bound["spec"]


def verdict(result: RunResult, name: str, obj: dict[str, Any], namespace: str) -> Verdict:
    spec, bound = policy(result, name)
    return evaluate(spec, bound, obj, namespace)


def allreduce_pod(result: RunResult) -> dict[str, Any]:
    """The Pod the all-reduce's JobSet creates, as the API server sees it (metadata and spec)."""
    (jobset,) = result.of_type(JOBSET)
    template = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return {"metadata": copy.deepcopy(template["metadata"]), "spec": copy.deepcopy(template["spec"])}


def sidecar_of(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["initContainers"] if c["name"] == "tcpxo-daemon")


def host_root_pod() -> dict[str, Any]:
    """What a team member must never run on shared nodes: privileged, host PID, the node's / mounted."""
    return {
        "metadata": {},
        "spec": {
            "hostPID": True,
            "containers": [
                {
                    "name": "shell",
                    "image": "busybox:1.37",
                    "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "node", "mountPath": "/node"}],
                }
            ],
            "volumes": [{"name": "node", "hostPath": {"path": "/"}}],
        },
    }


def test_the_allreduce_pods_are_admitted(train: RunResult) -> None:
    pod = allreduce_pod(train)
    for name in (POD_POLICY, DEVICE_POLICY):
        result = verdict(train, name, pod, NCCL)
        assert result.applies and result.admitted, (name, result.denied)


@pytest.mark.parametrize("namespace", [NCCL, "gpudirect-research", "research", "platform"])
def test_a_privileged_host_pid_pod_is_refused_where_gpudirect_runs_and_in_team_namespaces(
    train: RunResult, namespace: str
) -> None:
    result = verdict(train, POD_POLICY, host_root_pod(), namespace)
    assert result.applies
    assert {
        "host namespaces (hostNetwork, hostPID, hostIPC) are not allowed",
        "privileged containers are not allowed",
    } <= set(result.denied)
    assert any(m.startswith("hostPath volumes are allowed only") for m in result.denied)


def test_the_pod_policy_binds_the_gpudirect_and_team_namespaces_only(train: RunResult) -> None:
    _, bound = policy(train, POD_POLICY)
    (selector,) = bound["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert sorted(selector["values"]) == sorted(
        [NCCL, "gpudirect-research", "research", "gpudirect-platform", "platform"]
    )
    assert bound["validationActions"] == ["Deny"]
    assert not verdict(train, POD_POLICY, host_root_pod(), "kube-system").applies


def _refused(train: RunResult, pod: dict[str, Any], fragment: str) -> None:
    result = verdict(train, POD_POLICY, pod, NCCL)
    assert any(fragment in m for m in result.denied), result.denied


def test_net_admin_only_for_the_pinned_sidecar_as_rendered(train: RunResult) -> None:
    caps = "capabilities beyond Pod Security baseline's"
    # Another image under the sidecar's name.
    pod = allreduce_pod(train)
    sidecar_of(pod)["image"] = "us-docker.pkg.dev/attacker/rxdm:v1.0.21"
    _refused(train, pod, caps)
    # The pinned image running another command (it would hold NET_ADMIN and the host's /proc/sys).
    pod = allreduce_pod(train)
    sidecar_of(pod)["args"] = ["echo '|/tmp/x' > /hostprocsysfs/kernel/core_pattern"]
    _refused(train, pod, caps)
    # An extra mount over the sidecar's entrypoint directory.
    pod = allreduce_pod(train)
    pod["spec"]["volumes"].append({"name": "mine", "emptyDir": {}})
    sidecar_of(pod)["volumeMounts"].append({"name": "mine", "mountPath": "/fts"})
    _refused(train, pod, caps)
    # A probe is code run inside it.
    pod = allreduce_pod(train)
    sidecar_of(pod)["startupProbe"]["exec"]["command"] = ["sh", "-c", "id"]
    _refused(train, pod, caps)
    # The workload container asking for NET_ADMIN itself.
    pod = allreduce_pod(train)
    pod["spec"]["containers"][0]["securityContext"]["capabilities"] = {"add": ["NET_ADMIN"]}
    _refused(train, pod, caps)


def test_host_paths_as_gpudirect_mounts_them_and_no_other_way(train: RunResult) -> None:
    mounts = "mount read-only"
    # The host's /proc/sys into the workload container.
    pod = allreduce_pod(train)
    pod["spec"]["containers"][0]["volumeMounts"].append({"name": "nccl-host-proc-sys", "mountPath": "/p"})
    _refused(train, pod, mounts)
    # The NCCL plugin's directory, writable: a plugin planted there runs in the other team's jobs.
    pod = allreduce_pod(train)
    main = pod["spec"]["containers"][0]
    next(m for m in main["volumeMounts"] if m["name"] == "nccl-libraries").pop("readOnly")
    _refused(train, pod, mounts)
    # Another host path.
    pod = allreduce_pod(train)
    pod["spec"]["volumes"].append({"name": "kubelet", "hostPath": {"path": "/var/lib/kubelet"}})
    _refused(train, pod, "hostPath volumes are allowed only")


def test_no_ephemeral_container_or_exec_reaches_the_sidecar(train: RunResult) -> None:
    pod = allreduce_pod(train)
    pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox:1.37"}]
    _refused(train, pod, "shares no process namespace")
    into_sidecar = verdict(train, SIDECAR_EXEC_POLICY, {"container": "tcpxo-daemon"}, NCCL)
    assert into_sidecar.applies and not into_sidecar.admitted
    assert verdict(train, SIDECAR_EXEC_POLICY, {"container": "main"}, NCCL).admitted


def test_device_annotations_only_for_the_sidecar_its_devices_and_gpudirects_namespaces(
    train: RunResult,
) -> None:
    pod = allreduce_pod(train)
    annotations = pod["metadata"]["annotations"]
    # A Pod in a `restricted` or team namespace asking the NRI injector for a raw disk.
    disk = {"metadata": {"annotations": {"devices.gke.io/container.app": "- path: /dev/sda\n"}}, "spec": {}}
    for namespace in ("research", "serve-llama", "default"):
        result = verdict(train, DEVICE_POLICY, disk, namespace)
        assert result.applies and len(result.denied) == 4, result.denied
    # In GPUDirect's namespace: another device, another key, another field.
    for key, value in [
        (
            "devices.gke.io/container.tcpxo-daemon",
            annotations["devices.gke.io/container.tcpxo-daemon"] + "- path: /dev/sda\n",
        ),
        ("devices.gke.io/pod", "- path: /dev/nvidia0\n"),
        ("devices.gke.io", "- path: /dev/nvidia0\n"),
        (SIDECAR_KEY, "- path: /dev/nvidia0\n  major: 8\n"),
    ]:
        changed = copy.deepcopy(pod)
        changed["metadata"]["annotations"][key] = value
        assert not verdict(train, DEVICE_POLICY, changed, NCCL).admitted, key
    # No device annotation: the policy does not apply.
    plain = {"metadata": {"annotations": {"a": "b"}}, "spec": {}}
    assert not verdict(train, DEVICE_POLICY, plain, "research").applies


def test_the_device_policy_is_cluster_wide_with_the_injector(train: RunResult) -> None:
    _, bound = policy(train, DEVICE_POLICY)
    assert "namespaceSelector" not in bound["matchResources"]


def test_team_namespaces_never_enforce_privileged_and_gpudirect_pods_get_their_own(train: RunResult) -> None:
    labels = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"] for r in train.of_type(NAMESPACE)}
    for team in ("research", "platform"):
        own = labels[team]
        assert own["gke-gpu/team"] == team
        assert own["pod-security.kubernetes.io/enforce"] == "baseline"
        gpudirect = labels[f"gpudirect-{team}"]
        assert "gke-gpu/team" not in gpudirect and gpudirect["gke-gpu/gpudirect-team"] == team
        assert gpudirect["pod-security.kubernetes.io/enforce"] == "privileged"


def test_a_team_may_enforce_restricted_but_never_privileged() -> None:
    team = {"name": "research", "podSecurity": "restricted", "pools": {"train": {"gpus": 8}}}
    batch = {"kueue": True, "teams": [team]}
    result = render(stack_config(cluster=ZONAL, gpuPools=[MEGA], batch=batch))
    (namespace,) = [r for r in result.of_type(NAMESPACE) if r.inputs["metadata"]["name"] == "research"]
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    team["podSecurity"] = "privileged"
    message = config_error({"cluster": ZONAL, "gpuPools": [MEGA], "batch": batch})
    assert "gke-gpu:batch.teams[0].podSecurity: 'privileged' is not allowed" in message
    assert "'baseline' or 'restricted'" in message


def test_no_policy_without_gpudirect() -> None:
    assert not stack_render("serve").of_type(POLICY)


def test_the_component_refuses_device_namespaces_it_does_not_confine() -> None:
    args = {"flavors": ["RDMA"], "namespaces": ["a"], "device_namespaces": ["b"]}
    with pytest.raises(InvalidArgsError) as info:
        GpuDirectAdmission.check_args("admission", args)
    problems = info.value.problems
    assert any("device_namespaces: b must also be in namespaces" in p for p in problems), problems
    assert any("without TCPX or TCPXO" in p for p in problems), problems


def test_the_rendered_parts_users_copy_pass_for_every_flavour() -> None:
    from gke_gpu.gpudirect.admission_cel import binding, device_policy, pod_policy

    flavors = list(GpuDirectFlavor)
    for flavor in flavors:
        parts = gpudirect_pod_parts(flavor)
        pod = {
            "metadata": {"annotations": parts["annotations"]},
            "spec": {
                # What Kueue's ResourceFlavor puts on an admitted Pod (A4X Max's IPC_LOCK needs it).
                "nodeSelector": {ACCELERATOR_LABEL: FLAVORS[flavor].accelerators[0]},
                "initContainers": parts["initContainers"],
                "containers": [
                    {
                        "name": "main",
                        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                        "securityContext": parts["securityContext"],
                        "volumeMounts": parts["volumeMounts"],
                        "env": parts["env"],
                    }
                ],
                "volumes": parts["volumes"],
            },
        }
        for spec, name in (
            (pod_policy(flavors), POD_POLICY),
            (device_policy(flavors, ["ns"]), DEVICE_POLICY),
        ):
            result = evaluate(spec, binding(name, ["ns"]), pod, "ns")
            assert result.admitted, (flavor, name, result.denied)


def test_every_container_list_and_security_context_is_checked(train: RunResult) -> None:
    """The rules run over containers, init and ephemeral containers and the Pod's own securityContext,
    each list on its own (Kubernetes types them apart)."""
    debug = {"name": "debug", "image": "busybox:1.37", "securityContext": {"privileged": True}}
    pod = {
        "metadata": {},
        "spec": {"containers": [{"name": "a", "image": "x"}], "ephemeralContainers": [debug]},
    }
    assert "privileged containers are not allowed" in verdict(train, POD_POLICY, pod, "research").denied
    pod = {
        "metadata": {},
        "spec": {
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
            "containers": [{"name": "a", "image": "x"}],
        },
    }
    assert (
        "seccomp profiles other than RuntimeDefault and Localhost are not allowed"
        in verdict(train, POD_POLICY, pod, "research").denied
    )
    plain = {"metadata": {}, "spec": {"containers": [{"name": "a", "image": "x"}]}}
    assert verdict(train, POD_POLICY, plain, "research").admitted


def test_the_device_policy_is_there_whenever_the_injector_is_even_with_no_gpudirect_namespace() -> None:
    """A TCPXO pool with neither Kueue nor the all-reduce: no namespace may carry device annotations,
    nor attach its GPU networks."""
    result = render(stack_config(cluster=ZONAL, gpuPools=[MEGA]))
    names = {r.inputs["metadata"]["name"] for r in result.of_type(POLICY)}
    assert names == {DEVICE_POLICY, NETWORK_POLICY}
    disk = {"metadata": {"annotations": {"devices.gke.io/pod": "- path: /dev/nvidia0\n"}}, "spec": {}}
    assert not verdict(result, DEVICE_POLICY, disk, "default").admitted
