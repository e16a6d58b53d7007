"""The admission rules that confine GPUDirect's privilege, as Kubernetes ValidatingAdmissionPolicy
specs (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30) with CEL expressions. Pure
functions: GpuDirectAdmission (admission.py) declares them; the tests evaluate the same CEL over the
rendered Pods.

Why a policy rather than Pod Security alone: GPUDirect's Pods need host paths (the NCCL plugin's
libraries, the RxDM sidecar's host /sys and /proc/sys, TCPXO's aperture devices) and the sidecar's
NET_ADMIN, which only Pod Security `privileged` admits, and GKE's PodSecurity admission takes no
custom configuration (no exemptions: GKE's "Migrate from PodSecurityPolicy" page). So a namespace
where those Pods run enforces `privileged` at Pod Security, and the policy below refuses there
everything `baseline` refuses except exactly GPUDirect's exceptions:

* the sidecar (its name, pinned image, command, arguments, environment and mounts as
  gpudirect/pod_parts.py renders them; no probe or hook of its own, no exec into it: those would
  run other code with its rights) may add NET_ADMIN and mount the host's /sys and /proc/sys;
* any container may mount the NCCL plugin's and driver's host directories read-only, and TCPXO's
  aperture devices; a container of a Pod with the TCPX sidecar may add IPC_LOCK (any container,
  where the cluster has A4X Max GPUDirect pools: their gIB workloads pin memory);
* the device annotations (second policy) name only the sidecar and only the GPU devices and
  TCPXO's dmabuf helper, in the namespaces the binding lists.

Sources: kubernetes/website content/en/docs/concepts/security/pod-security-standards.md (the
`baseline` checks, mirrored below); content/en/examples/access/manifest-admission-control/
deny-privileged-policy.yaml (the shape of a policy over every container list);
GoogleCloudPlatform/container-engine-accelerators nri_device_injector/nri_device_injector.go
(1daec011: the keys `devices.gke.io/container.<name>`, `devices.gke.io/pod`, `devices.gke.io`,
and the YAML list of `path`, `type`, `major`, `minor`, `file_mode`, `uid`, `gid` it reads).
"""

import json
from dataclasses import dataclass
from typing import Any

from ..core.k8s import BASELINE_CAPABILITIES
from .flavors import GpuDirectFlavor
from .images import APERTURE_DEVICES, GIB_HOST_DIR, NVIDIA_HOST_DIR, NVIDIA_LIB64_HOST
from .pod_parts import RXDM_DEVICES, gpudirect_pod_parts

API_VERSION = "admissionregistration.k8s.io/v1"
POD_POLICY = "gke-gpu-gpudirect-pods"
DEVICE_POLICY = "gke-gpu-device-annotations"
SIDECAR_EXEC_POLICY = "gke-gpu-gpudirect-sidecar-exec"
DEVICE_KEY = "devices.gke.io"
# The sysctls `baseline` allows (pod-security-standards.md, "Sysctls", up to Kubernetes 1.32).
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
# Host directories any container may mount, read-only: the NCCL plugin and driver libraries (TCPX,
# TCPXO: lib64; RDMA: the driver's directory and gIB's).
READ_ONLY_HOST_PATHS = (NVIDIA_LIB64_HOST, NVIDIA_HOST_DIR, GIB_HOST_DIR)
# TCPXO's aperture devices: read-write (the LLCM path maps their PCI resources).
WRITABLE_HOST_PATHS = (APERTURE_DEVICES,)
# Only the sidecar mounts these (it tunes the host's network stack).
SIDECAR_HOST_PATHS = ("/sys", "/proc/sys")
_NRI_FLAVORS = (GpuDirectFlavor.TCPX, GpuDirectFlavor.TCPXO)


def cel(value: Any) -> str:
    """A CEL literal of a plain value (strings in JSON's escapes, which CEL reads the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(cel(v) for v in value) + "]"
    raise TypeError(f"no CEL literal for {type(value).__name__}")


@dataclass(frozen=True)
class Sidecar:
    """The RxDM sidecar of one flavour, as the policy pins it."""

    flavor: GpuDirectFlavor
    container: dict[str, Any]
    volumes: dict[str, dict[str, Any]]

    @property
    def name(self) -> str:
        return str(self.container["name"])

    def mounts_key(self) -> list[str]:
        """Each mount as `<path>=<source>[:ro]`, the source a host path or `emptyDir`."""
        keys = []
        for mount in self.container["volumeMounts"]:
            volume = self.volumes[mount["name"]]
            source = volume["hostPath"]["path"] if "hostPath" in volume else "emptyDir"
            keys.append(f"{mount['mountPath']}={source}{':ro' if mount.get('readOnly') else ''}")
        return keys

    def env_key(self) -> list[str]:
        return [f"{e['name']}={e['value']}" for e in self.container.get("env", [])]


def sidecar(flavor: GpuDirectFlavor) -> Sidecar:
    parts = gpudirect_pod_parts(flavor)
    (container,) = parts["initContainers"]
    return Sidecar(flavor, container, {v["name"]: v for v in parts["volumes"]})


def _source(mount: str) -> str:
    """CEL: the source of the volume a mount `mount` names, as in Sidecar.mounts_key."""
    return (
        f"variables.volumes.filter(v, v.name == {mount}.name)"
        ".map(v, has(v.hostPath) ? v.hostPath.path : (has(v.emptyDir) ? 'emptyDir' : 'other'))"
    )


def _is_sidecar(sidecar: Sidecar, c: str = "c") -> str:
    """CEL: container `c` is exactly `sidecar`, as pod_parts renders it."""
    spec = sidecar.container
    probe = spec.get("startupProbe", {}).get("exec", {}).get("command")
    checks = [
        f"{c}.name == {cel(sidecar.name)}",
        f"{c}.image == {cel(spec['image'])}",
        f"has({c}.command) && {c}.command == {cel(spec['command'])}",
        (f"has({c}.args) && {c}.args == {cel(spec['args'])}" if "args" in spec else f"!has({c}.args)"),
        f"!has({c}.envFrom)",
        (
            f"has({c}.env) && {c}.env.map(e, e.name + '=' + (has(e.value) ? e.value : '<ref>')) == "
            f"{cel(sidecar.env_key())}"
        ),
        f"!has({c}.lifecycle) && !has({c}.livenessProbe) && !has({c}.readinessProbe)",
        (
            f"!has({c}.startupProbe) || (has({c}.startupProbe.exec) && "
            f"{c}.startupProbe.exec.command == {cel(probe)})"
            if probe
            else f"!has({c}.startupProbe)"
        ),
        f"!has({c}.workingDir) && !has({c}.volumeDevices)",
        (
            f"has({c}.volumeMounts) && {c}.volumeMounts.map(m, m.mountPath + '=' + "
            f"({_source('m')}.size() == 1 ? {_source('m')}[0] : 'other') + "
            f"(has(m.readOnly) && m.readOnly ? ':ro' : '') + "
            f"(has(m.subPath) || has(m.subPathExpr) || has(m.mountPropagation) ? ':sub' : '')) == "
            f"{cel(sidecar.mounts_key())}"
        ),
    ]
    return "(" + " && ".join(f"({check})" for check in checks) + ")"


def _sec(c: str, field: str) -> str:
    return f"has({c}.securityContext) && has({c}.securityContext.{field})"


def pod_policy(flavors: list[GpuDirectFlavor]) -> dict[str, Any]:
    """The Pod policy's spec: `baseline`, plus GPUDirect's exceptions for `flavors`' sidecars."""
    sidecars = [sidecar(f) for f in flavors if f in _NRI_FLAVORS]
    is_sidecar = " || ".join(_is_sidecar(s) for s in sidecars) or "false"
    baseline_caps = cel(BASELINE_CAPABILITIES)
    host_paths = [*READ_ONLY_HOST_PATHS, *WRITABLE_HOST_PATHS, *(SIDECAR_HOST_PATHS if sidecars else ())]
    tcpx = next((s for s in sidecars if s.flavor is GpuDirectFlavor.TCPX), None)
    init_containers = "has(object.spec.initContainers) ? object.spec.initContainers : []"
    variables = [
        {"name": "volumes", "expression": "has(object.spec.volumes) ? object.spec.volumes : []"},
        {"name": "sidecarNames", "expression": cel([s.name for s in sidecars])},
        {"name": "initContainers", "expression": init_containers},
        {"name": "hasSidecar", "expression": f"variables.initContainers.exists(c, {is_sidecar})"},
    ]
    caps_allowed = f"cap in {baseline_caps}"
    if sidecars:
        caps_allowed += f" || (cap == 'NET_ADMIN' && ({is_sidecar}))"
    if tcpx is not None:
        beside_tcpx = f"variables.initContainers.exists(s, {_is_sidecar(tcpx, 's')})"
        caps_allowed += f" || (cap == 'IPC_LOCK' && {beside_tcpx})"
    if GpuDirectFlavor.RDMA_A4X_MAX in flavors:
        # A4X Max's gIB workloads pin memory (cluster-toolkit's nccl-jobset-example.yaml adds IPC_LOCK).
        caps_allowed += " || cap == 'IPC_LOCK'"
    own_hosts = cel(list(SIDECAR_HOST_PATHS))
    read_only = cel(list(READ_ONLY_HOST_PATHS))
    validations = [
        (
            "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && "
            "!(has(object.spec.hostPID) && object.spec.hostPID) && "
            "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
            "host namespaces (hostNetwork, hostPID, hostIPC) are not allowed",
        ),
        (
            f"variables.containers.all(c, !({_sec('c', 'privileged')} && c.securityContext.privileged))",
            "privileged containers are not allowed",
        ),
        (
            "variables.contexts.all(s, !(has(s.windowsOptions) && has(s.windowsOptions.hostProcess) "
            "&& s.windowsOptions.hostProcess))",
            "Windows HostProcess containers are not allowed",
        ),
        (
            f"variables.containers.all(c, !({_sec('c', 'capabilities')}) || "
            f"!has(c.securityContext.capabilities.add) || "
            f"c.securityContext.capabilities.add.all(cap, {caps_allowed}))",
            "capabilities beyond Pod Security baseline's are not allowed, except NET_ADMIN for the "
            "pinned GPUDirect sidecar and IPC_LOCK beside the TCPX sidecar"
            + (" or on A4X Max" if GpuDirectFlavor.RDMA_A4X_MAX in flavors else ""),
        ),
        (
            f"variables.volumes.all(v, !has(v.hostPath) || v.hostPath.path in {cel(host_paths)})",
            f"hostPath volumes are allowed only for GPUDirect's host paths: {', '.join(host_paths)}",
        ),
        (
            "variables.containers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, "
            f"variables.volumes.filter(v, v.name == m.name && has(v.hostPath) && "
            f"(v.hostPath.path in {own_hosts} || "
            f"(v.hostPath.path in {read_only} && !(has(m.readOnly) && m.readOnly)))).size() == 0"
            f" || c.name in variables.sidecarNames && ({is_sidecar})))",
            "the NCCL and driver host directories mount read-only, and the host's /sys and /proc/sys "
            "only into the pinned GPUDirect sidecar",
        ),
        (
            "variables.containers.all(c, !has(c.ports) || "
            "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
            "host ports are not allowed",
        ),
        (
            "variables.contexts.all(s, !has(s.seccompProfile) || s.seccompProfile.type != 'Unconfined')",
            "seccomp profile Unconfined is not allowed",
        ),
        (
            "variables.contexts.all(s, !has(s.appArmorProfile) || s.appArmorProfile.type != 'Unconfined') && "
            "(!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
            "!k.startsWith('container.apparmor.security.beta.kubernetes.io/') || "
            "object.metadata.annotations[k] != 'unconfined'))",
            "AppArmor profile unconfined is not allowed",
        ),
        (
            "variables.contexts.all(s, !has(s.seLinuxOptions) || "
            "(!has(s.seLinuxOptions.user) && !has(s.seLinuxOptions.role) && "
            f"(!has(s.seLinuxOptions.type) || s.seLinuxOptions.type in {cel(SELINUX_TYPES)})))",
            "SELinux user, role or a custom type are not allowed",
        ),
        (
            "variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.procMount) "
            "|| c.securityContext.procMount == 'Default')",
            "procMount other than Default is not allowed",
        ),
        (
            "!has(object.spec.securityContext) || !has(object.spec.securityContext.sysctls) || "
            f"object.spec.securityContext.sysctls.all(s, s.name in {cel(SAFE_SYSCTLS)})",
            "only Pod Security baseline's safe sysctls are allowed",
        ),
    ]
    if sidecars:
        validations.append(
            (
                "!variables.hasSidecar || ((!has(object.spec.shareProcessNamespace) || "
                "!object.spec.shareProcessNamespace) && !has(object.spec.ephemeralContainers))",
                "a Pod with the GPUDirect sidecar shares no process namespace and takes no ephemeral "
                "container (either would reach the sidecar's rights)",
            )
        )
    validations = [(_typed_lists(e), m) for e, m in validations]
    return {
        **_on_pods(["CREATE", "UPDATE"], ["pods", "pods/ephemeralcontainers"]),
        "variables": variables,
        "validations": [{"expression": e, "message": m} for e, m in validations],
    }


# Kubernetes types each list by its schema (a Container is not an EphemeralContainer, a Pod's
# securityContext not a container's), so the rules run over each list on its own, never over a
# concatenation of lists of two types.
_CONTAINER_LISTS = (
    "object.spec.containers",
    "(has(object.spec.initContainers) ? object.spec.initContainers : [])",
    "(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])",
)


def _call_body(expression: str, start: int) -> int:
    """The index of the parenthesis closing the one at `start - 1`."""
    depth = 1
    quote = ""
    i = start
    while depth:
        ch = expression[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        i += 1
    return i - 1


def _typed_lists(expression: str) -> str:
    """`variables.containers.all(c, X)` over each container list, and `variables.contexts.all(s, X)`
    over the Pod's securityContext and each container's."""
    for name, var in (("containers", "c"), ("contexts", "s")):
        marker = f"variables.{name}.all({var}, "
        while marker in expression:
            at = expression.index(marker)
            end = _call_body(expression, at + len(marker))
            body = expression[at + len(marker) : end]
            if name == "containers":
                parts = [f"{lst}.all({var}, {body})" for lst in _CONTAINER_LISTS]
            else:
                parts = [
                    f"(!has(object.spec.securityContext) || [object.spec.securityContext].all(s, {body}))",
                    *(
                        f"{lst}.all(c, !has(c.securityContext) || [c.securityContext].all(s, {body}))"
                        for lst in _CONTAINER_LISTS
                    ),
                ]
            expression = expression[:at] + "(" + " && ".join(parts) + ")" + expression[end + 1 :]
    return expression


def device_policy(flavors: list[GpuDirectFlavor], namespaces: list[str]) -> dict[str, Any]:
    """The device annotation policy's spec: `devices.gke.io` keys (the NRI device injector's) only in
    `namespaces`, only `devices.gke.io/container.<sidecar>`, and only the sidecar's own devices, each
    as `- path: <device>` (what pod_parts renders; any other field, such as a major/minor, uid or
    mode, is refused)."""
    sidecars = [sidecar(f) for f in flavors if f in _NRI_FLAVORS]
    devices = sorted({d for s in sidecars for d in RXDM_DEVICES[s.flavor]})
    keys = [f"{DEVICE_KEY}/container.{s.name}" for s in sidecars]
    device = "(" + "|".join(d.replace(".", "\\.") for d in devices) + ")"
    pattern = f"^(- path: {device}\\n)+$"
    is_device_key = f"(k == {cel(DEVICE_KEY)} || k.startsWith({cel(DEVICE_KEY + '/')}))"
    return {
        **_on_pods(["CREATE", "UPDATE"], ["pods"]),
        "matchConditions": [
            {
                "name": "has-device-annotation",
                "expression": "has(object.metadata.annotations) && "
                f"object.metadata.annotations.exists(k, {is_device_key})",
            }
        ],
        "variables": [
            {
                "name": "deviceKeys",
                "expression": f"object.metadata.annotations.filter(k, {is_device_key})",
            }
        ],
        "validations": [
            {
                "expression": f"request.namespace in {cel(namespaces)}",
                "message": "devices.gke.io annotations (the NRI device injector's) are allowed only in "
                f"GPUDirect's namespaces: {', '.join(namespaces) or 'none'}",
            },
            {
                "expression": f"variables.deviceKeys.all(k, k in {cel(keys)})",
                "message": f"the only devices.gke.io annotations allowed are {', '.join(keys) or 'none'}",
            },
            {
                "expression": "variables.deviceKeys.all(k, "
                f"object.metadata.annotations[k].matches({cel(pattern)}))",
                "message": "a devices.gke.io annotation may list only these devices, each as "
                f"'- path: <device>': {', '.join(devices)}",
            },
        ],
    }


def sidecar_exec_policy(flavors: list[GpuDirectFlavor]) -> dict[str, Any]:
    """No `kubectl exec` or `attach` into the sidecar (a shell there has its NET_ADMIN and the host's
    /proc/sys), nor without naming the container."""
    names = [sidecar(f).name for f in flavors if f in _NRI_FLAVORS]
    return {
        **_on_pods(["CONNECT"], ["pods/exec", "pods/attach"]),
        "validations": [
            {
                "expression": f"has(object.container) && object.container != '' && "
                f"!(object.container in {cel(names)})",
                "message": f"exec and attach name their container, and never the GPUDirect sidecar "
                f"({', '.join(names)})",
            }
        ],
    }


def _on_pods(operations: list[str], resources: list[str]) -> dict[str, Any]:
    """A policy's failure policy and match on core/v1 Pod `resources` for `operations`: fail closed,
    so an API server that cannot evaluate the policy admits nothing it matches."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": resources}
            ]
        },
    }


def binding(policy: str, namespaces: list[str] | None) -> dict[str, Any]:
    """A Deny binding of `policy` to `namespaces` (None: every namespace)."""
    match: dict[str, Any] = {}
    if namespaces is not None:
        match["namespaceSelector"] = {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}
            ]
        }
    return {"policyName": policy, "validationActions": ["Deny"], "matchResources": match}


def flavors_with_injector(flavors: list[GpuDirectFlavor]) -> list[GpuDirectFlavor]:
    """The flavours whose node software includes the NRI device injector (TCPX, TCPXO)."""
    return [f for f in flavors if f in _NRI_FLAVORS]
