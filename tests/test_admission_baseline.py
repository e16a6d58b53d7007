"""The CEL copy of Pod Security `baseline` (components/gpudirect/admission_baseline.py) against the
standard's own implementation, vendored at the newest Kubernetes version GKE offers
(tests/upstream/pod-security-admission/SOURCES.md): every check has its counterpart, the allowed values
are upstream's, and each check refuses what upstream refuses and admits what it admits (a test per rule,
through the policy the program renders)."""

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gke_gpu.core.k8s import BASELINE_CAPABILITIES
from gke_gpu.gpudirect.admission_baseline import (
    PROFILE_TYPES,
    REPLACED_CHECKS,
    SAFE_SYSCTLS,
    SELINUX_TYPES,
    baseline_checks,
)
from gke_gpu.gpudirect.admission_cel import POD_POLICY, binding, pod_policy
from gke_gpu.gpudirect.flavors import GpuDirectFlavor
from tests.admission_eval import evaluate

UPSTREAM = Path(__file__).parent / "upstream" / "pod-security-admission" / "policy"
# The git blob of each vendored file (SOURCES.md): a file edited by hand fails here.
VENDORED = {
    "check_hostNamespaces.go": "9092b64e92a45fe2dcafa0c9e96a779f5a64cb44",
    "check_privileged.go": "899642e4cdadcbc2ca95d55a0814c255f5c86655",
    "check_capabilities_baseline.go": "aad61738b505e85b912f0637858efd6c962e931d",
    "check_hostPathVolumes.go": "3a419ff24954fd6f720de696e7eafe0f4a77d250",
    "check_hostPorts.go": "9e598cde8fd0b92e94a58b9e978da4aa1a17e25c",
    "check_appArmorProfile.go": "1279403116169a085a6c5e61fdfd7d862cd244f0",
    "check_seLinuxOptions.go": "b4263d23b902ef2de366e22254fc0ec8cedadf58",
    "check_procMount_baseline.go": "bd19b4c656e96c054f48a265f3197fa31e6fd9e2",
    "check_seccompProfile_baseline.go": "d45dba707633ef3de958cf36abc3279b97862c67",
    "check_sysctls.go": "180340cc6a88fac3feb124d1651ffda6dd24fa5c",
    "check_windowsHostProcess.go": "9e6dbe2e351e3980418b94e62dd70760dfb78255",
    "check_hostProbesAndhostLifecycle.go": "ad25d8eab28326d7ddf840c08d919c5a6599af76",
}


def source(name: str) -> str:
    return (UPSTREAM / name).read_text()


def upstream_baseline_ids() -> set[str]:
    """The ID of every check of level baseline in the vendored files."""
    ids = set()
    for path in UPSTREAM.glob("check_*.go"):
        text = path.read_text()
        if "api.LevelBaseline" not in text:
            continue
        (found,) = re.findall(r"ID:\s+(\"\w+\"|\w+),", text)
        if found.startswith('"'):
            ids.add(found.strip('"'))
        else:
            ids.add(re.search(rf"{found}\s+CheckID\s*=\s*\"(\w+)\"", text).group(1))  # type: ignore[union-attr]
    return ids


def go_strings(block: str) -> list[str]:
    return re.findall(r'"([^"]*)"', block)


def newest_set(text: str, prefix: str) -> list[str]:
    """The union a Go file builds for its newest version: `<prefix>V1DotNN` (sysctls) chained by Union."""
    sets: dict[str, list[str]] = {}
    for name, base, body in re.findall(
        rf"({prefix}\w+)\s*=\s*(?:(\w+)\.Union\()?sets\.New\w*\(([^)]*)\)", text
    ):
        sets[name] = [*(sets.get(base, []) if base else []), *go_strings(body)]
    return sets[max(sets, key=lambda n: int(re.sub(r"\D", "", n) or 0))]


# --------------------------------------------------------------------------------------------------
# The copy is upstream's.


def test_the_vendored_files_are_upstreams() -> None:
    for name, blob in VENDORED.items():
        hashed = subprocess.run(
            ["git", "hash-object", str(UPSTREAM / name)],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        assert hashed == blob, name
    assert {p.name for p in UPSTREAM.glob("*.go")} == set(VENDORED)


def test_every_baseline_check_upstream_has_its_counterpart() -> None:
    ours = {check.id for check in baseline_checks()}
    assert ours | set(REPLACED_CHECKS) == upstream_baseline_ids()
    assert not ours & set(REPLACED_CHECKS)


def test_the_allowed_sysctls_are_the_newest_versions() -> None:
    assert sorted(SAFE_SYSCTLS) == sorted(newest_set(source("check_sysctls.go"), "sysctlsAllowed"))


def test_the_allowed_selinux_types_are_the_newest_versions() -> None:
    assert sorted(SELINUX_TYPES) == sorted(
        newest_set(source("check_seLinuxOptions.go"), "selinuxAllowedTypes")
    )


def test_the_default_capabilities_are_upstreams() -> None:
    text = source("check_capabilities_baseline.go")
    block = re.search(r"capabilities_allowed_1_0 = sets\.NewString\(([^)]*)\)", text)
    assert block is not None
    assert sorted(BASELINE_CAPABILITIES) == sorted(go_strings(block.group(1)))


def test_the_allowed_profile_types_are_upstreams() -> None:
    for name in ("check_seccompProfile_baseline.go", "check_appArmorProfile.go"):
        text = source(name)
        allowed = re.search(r"\*\*Allowed Values:\*\* 'RuntimeDefault', 'Localhost', undefined", text)
        assert allowed, name
    assert PROFILE_TYPES == ("RuntimeDefault", "Localhost")


# --------------------------------------------------------------------------------------------------
# A test per rule: what it refuses, what it admits, through the rendered policy.

SPEC = pod_policy([GpuDirectFlavor.TCPXO])
BINDING = binding(POD_POLICY, ["team"])


def pod(
    *, pod_spec: dict[str, Any] | None = None, annotations: dict[str, str] | None = None, **c: Any
) -> dict:
    container = {"name": "app", "image": "busybox:1.37", **c}
    return {
        "metadata": {"annotations": annotations or {}},
        "spec": {"containers": [container], **(pod_spec or {})},
    }


def denied(obj: dict[str, Any]) -> list[str]:
    return evaluate(SPEC, BINDING, obj, "team").denied


def messages(check_id: str) -> str:
    (found,) = [c.message for c in baseline_checks() if c.id == check_id]
    return found


# (check ID, a Pod it refuses, a Pod it admits), each from the check's own doc comment upstream.
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("hostNamespaces", pod(pod_spec={"hostIPC": True}), pod(pod_spec={"hostNetwork": False})),
    ("privileged", pod(securityContext={"privileged": True}), pod(securityContext={"privileged": False})),
    (
        "windowsHostProcess",
        pod(pod_spec={"securityContext": {"windowsOptions": {"hostProcess": True}}}),
        pod(securityContext={"windowsOptions": {"hostProcess": False}}),
    ),
    (
        "capabilities_baseline",
        pod(securityContext={"capabilities": {"add": ["NET_RAW"]}}),
        pod(securityContext={"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE"], "drop": ["ALL"]}}),
    ),
    ("hostPorts", pod(ports=[{"containerPort": 80, "hostPort": 8080}]), pod(ports=[{"containerPort": 80}])),
    (
        "seccompProfile_baseline",
        pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
        pod(securityContext={"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
    ),
    (
        "appArmorProfile",
        pod(annotations={"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}),
        pod(annotations={"container.apparmor.security.beta.kubernetes.io/app": "localhost/mine"}),
    ),
    (
        "seLinuxOptions",
        pod(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
        pod(securityContext={"seLinuxOptions": {"type": "container_engine_t", "level": "s0:c1"}}),
    ),
    (
        "procMount",
        pod(securityContext={"procMount": "Unmasked"}),
        pod(pod_spec={"hostUsers": False}, securityContext={"procMount": "Unmasked"}),
    ),
    (
        "sysctls",
        pod(pod_spec={"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
        pod(
            pod_spec={"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_notsent_lowat", "value": "1"}]}}
        ),
    ),
    (
        "hostProbesAndHostLifecycle",
        pod(livenessProbe={"httpGet": {"host": "169.254.169.254", "path": "/", "port": 80}}),
        pod(livenessProbe={"httpGet": {"host": "", "path": "/", "port": 80}}),
    ),
]


def test_every_check_has_a_case() -> None:
    assert {case[0] for case in CASES} == {c.id for c in baseline_checks()}


@pytest.mark.parametrize(("check_id", "refused", "admitted"), CASES, ids=[c[0] for c in CASES])
def test_each_check_refuses_what_upstream_refuses_and_admits_what_it_admits(
    check_id: str, refused: dict[str, Any], admitted: dict[str, Any]
) -> None:
    message = messages(check_id)
    assert any(m.startswith(message) for m in denied(refused)), denied(refused)
    assert denied(admitted) == []


@pytest.mark.parametrize("where", ["initContainers", "ephemeralContainers"])
def test_each_check_runs_over_init_and_ephemeral_containers(where: str) -> None:
    obj = {
        "metadata": {},
        "spec": {
            "containers": [{"name": "app", "image": "busybox:1.37"}],
            where: [{"name": "x", "image": "busybox:1.37", "securityContext": {"procMount": "Unmasked"}}],
        },
    }
    assert messages("procMount") in denied(obj)


def test_a_hostpath_outside_gpudirects_own_is_refused() -> None:
    """hostPathVolumes, replaced by GPUDirect's host path rules: any other host path is refused."""
    obj = pod(volumeMounts=[{"name": "etc", "mountPath": "/etc-host", "readOnly": True}])
    obj["spec"]["volumes"] = [{"name": "etc", "hostPath": {"path": "/etc"}}]
    assert any(m.startswith("hostPath volumes are allowed only") for m in denied(obj))
