"""The admission rules that confine GPUDirect's privilege, as Kubernetes ValidatingAdmissionPolicy
specs (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30) with CEL expressions. Pure
functions: GpuDirectAdmission (admission.py) declares them; the tests evaluate the same CEL over the
rendered Pods.

Why a policy rather than Pod Security alone: GPUDirect's Pods need host paths (the NCCL plugin's
libraries, the RxDM sidecar's host /sys and /proc/sys, TCPXO's aperture devices) and the sidecar's
NET_ADMIN, which only Pod Security `privileged` admits, and GKE's PodSecurity admission takes no
custom configuration (no exemptions: GKE's "Migrate from PodSecurityPolicy" page). So a namespace
where those Pods run enforces `privileged` at Pod Security, and the policy below refuses there
everything `baseline` refuses (admission_baseline.py) except exactly GPUDirect's exceptions, each one
for the flavour whose Pods need it (`FlavorAllowances`, read from the Pod parts pod_parts.py renders):

* the sidecar (its name, pinned image, command, arguments, environment and mounts as
  gpudirect/pod_parts.py renders them, an init container with `restartPolicy: Always`; no probe or
  hook of its own, no exec into it: those would run other code with its rights) may add NET_ADMIN and
  mount the host's /sys and /proc/sys; a container with a sidecar's name that is not the pinned sidecar
  is refused wherever it sits;
* any container may mount the NCCL plugin's and driver's host directories of the cluster's flavours
  read-only;
* what a flavour's workload container adds besides (TCPXO's aperture devices, read-write as Google's
  and NVIDIA's manifests mount them; TCPX's and A4X Max's IPC_LOCK) only in a Pod of that flavour: beside
  its pinned sidecar (TCPX, TCPXO), or pinned by node selector to its machines (A4X Max, which has none);
* the device annotations (second policy) only for the pinned sidecar, only its GPU devices and TCPXO's
  dmabuf helper, in the namespaces the binding lists.

Sources: admission_baseline.py (Pod Security `baseline`); kubernetes/website
content/en/examples/access/manifest-admission-control/deny-privileged-policy.yaml (the shape of a policy
over every container list); GoogleCloudPlatform/container-engine-accelerators
nri_device_injector/nri_device_injector.go (1daec011: the keys `devices.gke.io/container.<name>`,
`devices.gke.io/pod`, `devices.gke.io`, matched by container name only, and the YAML list of `path`,
`type`, `major`, `minor`, `file_mode`, `uid`, `gid` it reads); gpudirect-tcpxo/nccl-test-latest.yaml
(992db812) and NVIDIA/aicr@3c2108c7
recipes/components/kubeflow-trainer/manifests/torch-distributed-tcpxo-cluster-training-runtime.yaml (the
aperture devices mounted read-write into the workload container: the LLCM path maps their PCI resources).
"""

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..core.nodes import ACCELERATOR_LABEL
from .admission_baseline import baseline_checks
from .admission_common import binding, cel, on_resources, typed_lists
from .flavors import FLAVORS, GpuDirectFlavor
from .pod_parts import RXDM_DEVICES, gpudirect_pod_parts

__all__ = ["binding", "cel"]

POD_POLICY = "gke-gpu-gpudirect-pods"
DEVICE_POLICY = "gke-gpu-device-annotations"
SIDECAR_EXEC_POLICY = "gke-gpu-gpudirect-sidecar-exec"
DEVICE_KEY = "devices.gke.io"
DEVICE_CONTAINER_KEY = f"{DEVICE_KEY}/container."
_NRI_FLAVORS = (GpuDirectFlavor.TCPX, GpuDirectFlavor.TCPXO)


class Sidecar(NamedTuple):
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


@dataclass(frozen=True)
class FlavorAllowances:
    """What one flavour's Pods need beyond `baseline`, read from the Pod parts it renders: the host
    paths its containers mount read-only, those only its sidecar mounts, those its workload mounts
    read-write, and the capabilities its workload adds."""

    flavor: GpuDirectFlavor
    sidecar: Sidecar | None
    read_only: tuple[str, ...]
    sidecar_only: tuple[str, ...]
    writable: tuple[str, ...]
    capabilities: tuple[str, ...] = field(default=())


def allowances(flavor: GpuDirectFlavor) -> FlavorAllowances:
    parts = gpudirect_pod_parts(flavor)
    host = {v["name"]: v["hostPath"]["path"] for v in parts["volumes"] if "hostPath" in v}
    workload = {m["name"]: bool(m.get("readOnly")) for m in parts["volumeMounts"] if m["name"] in host}
    read_only = tuple(host[n] for n, ro in workload.items() if ro)
    writable = tuple(host[n] for n, ro in workload.items() if not ro)
    sidecar_only = tuple(path for n, path in host.items() if n not in workload)
    added = parts["securityContext"].get("capabilities", {}).get("add", [])
    return FlavorAllowances(
        flavor,
        sidecar(flavor) if flavor in _NRI_FLAVORS else None,
        read_only,
        sidecar_only,
        writable,
        tuple(added),
    )


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
        f"has({c}.restartPolicy) && {c}.restartPolicy == {cel(spec['restartPolicy'])}",
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


def _any_sidecar(sidecars: list[Sidecar], c: str = "c") -> str:
    return " || ".join(_is_sidecar(s, c) for s in sidecars) or "false"


def _pod_of(flavor: FlavorAllowances) -> str:
    """CEL: the Pod is one of `flavor`'s: beside its pinned sidecar, or (no sidecar) pinned by node
    selector to its machines."""
    if flavor.sidecar is not None:
        return f"variables.initContainers.exists(s, {_is_sidecar(flavor.sidecar, 's')})"
    accelerators = cel(list(FLAVORS[flavor.flavor].accelerators))
    return (
        f"has(object.spec.nodeSelector) && {cel(ACCELERATOR_LABEL)} in object.spec.nodeSelector && "
        f"object.spec.nodeSelector[{cel(ACCELERATOR_LABEL)}] in {accelerators}"
    )


def _variable(flavor: GpuDirectFlavor) -> str:
    return "pod" + "".join(part.capitalize() for part in str(flavor).replace("-", " ").split())


def pod_policy(flavors: list[GpuDirectFlavor]) -> dict[str, Any]:
    """The Pod policy's spec: `baseline`, plus GPUDirect's exceptions, each for its flavour's Pods."""
    flavor_allowances = [allowances(f) for f in flavors]
    sidecars = [a.sidecar for a in flavor_allowances if a.sidecar is not None]
    is_sidecar = _any_sidecar(sidecars)
    read_only = sorted({p for a in flavor_allowances for p in a.read_only})
    sidecar_only = sorted({p for a in flavor_allowances for p in a.sidecar_only})
    host_paths = sorted({*read_only, *sidecar_only, *(p for a in flavor_allowances for p in a.writable)})
    lists = ("object.spec.containers", "variables.initContainers", "variables.ephemeralContainers")
    variables = [
        {"name": "volumes", "expression": "has(object.spec.volumes) ? object.spec.volumes : []"},
        {"name": "sidecarNames", "expression": cel([s.name for s in sidecars])},
        {
            "name": "initContainers",
            "expression": "has(object.spec.initContainers) ? object.spec.initContainers : []",
        },
        {
            "name": "ephemeralContainers",
            "expression": "has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : []",
        },
        # Wherever it sits: a sidecar named in spec.containers is refused below, and its Pod too.
        {
            "name": "hasSidecar",
            "expression": " || ".join(f"{lst}.exists(c, c.name in variables.sidecarNames)" for lst in lists),
        },
        *({"name": _variable(a.flavor), "expression": _pod_of(a)} for a in flavor_allowances),
    ]
    caps = [f"(cap == 'NET_ADMIN' && ({is_sidecar}))"] if sidecars else []
    caps += [
        f"(cap in {cel(list(a.capabilities))} && variables.{_variable(a.flavor)})"
        for a in flavor_allowances
        if a.capabilities
    ]
    writable = [
        f"(v.hostPath.path in {cel(list(a.writable))} && variables.{_variable(a.flavor)})"
        for a in flavor_allowances
        if a.writable
    ]
    mount_allowed = " || ".join(
        [
            f"(v.hostPath.path in {cel(read_only)} && has(m.readOnly) && m.readOnly)",
            f"(v.hostPath.path in {cel(sidecar_only)} && ({is_sidecar}))",
            *writable,
        ]
    )
    validations: list[tuple[str, str]] = []
    for check in baseline_checks(" || ".join(caps)):
        message = check.message
        if check.id == "capabilities_baseline":
            message += ", except each GPUDirect flavour's own: " + _capability_exceptions(flavor_allowances)
        validations.append((check.expression, message))
    validations += [
        (
            f"variables.volumes.all(v, !has(v.hostPath) || v.hostPath.path in {cel(host_paths)})",
            "hostPath volumes are allowed only for GPUDirect's host paths: "
            + (", ".join(host_paths) or "none"),
        ),
        (
            "variables.containers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, "
            "variables.volumes.filter(v, v.name == m.name && has(v.hostPath)).all(v, "
            f"{mount_allowed})))",
            "the NCCL and driver host directories mount read-only, the host's /sys and /proc/sys only "
            "into the pinned GPUDirect sidecar, and TCPXO's aperture devices only beside the pinned "
            "TCPXO sidecar",
        ),
    ]
    if sidecars:
        validations += [
            (
                "object.spec.containers.all(c, !(c.name in variables.sidecarNames)) && "
                "variables.ephemeralContainers.all(c, !(c.name in variables.sidecarNames)) && "
                f"variables.initContainers.all(c, !(c.name in variables.sidecarNames) || {is_sidecar})",
                "a container named like the GPUDirect sidecar ("
                + ", ".join(s.name for s in sidecars)
                + ") is the pinned sidecar exactly as gpudirect/pod_parts.py renders it, an init "
                "container with restartPolicy Always",
            ),
            (
                "!variables.hasSidecar || ((!has(object.spec.shareProcessNamespace) || "
                "!object.spec.shareProcessNamespace) && variables.ephemeralContainers.size() == 0)",
                "a Pod with the GPUDirect sidecar shares no process namespace and takes no ephemeral "
                "container (either would reach the sidecar's rights)",
            ),
        ]
    return {
        **on_resources(["CREATE", "UPDATE"], ["pods", "pods/ephemeralcontainers"]),
        "variables": variables,
        "validations": [{"expression": typed_lists(e), "message": m} for e, m in validations],
    }


def _capability_exceptions(flavor_allowances: list[FlavorAllowances]) -> str:
    parts = [
        f"NET_ADMIN for the pinned {a.flavor} sidecar" for a in flavor_allowances if a.sidecar is not None
    ]
    for a in flavor_allowances:
        if a.capabilities:
            where = (
                f"beside the pinned {a.flavor} sidecar"
                if a.sidecar is not None
                else f"on Pods whose nodeSelector pins {ACCELERATOR_LABEL} to "
                + ", ".join(FLAVORS[a.flavor].accelerators)
            )
            parts.append(f"{', '.join(a.capabilities)} {where}")
    return "; ".join(parts) or "none"


def device_policy(flavors: list[GpuDirectFlavor], namespaces: list[str]) -> dict[str, Any]:
    """The device annotation policy's spec: `devices.gke.io` keys (the NRI device injector's) only in
    `namespaces`, only `devices.gke.io/container.<sidecar>` naming an init container of the Pod that is
    the pinned sidecar (the injector matches by name alone), and only the sidecar's own devices, each
    as `- path: <device>` (what pod_parts renders; any other field, such as a major/minor, uid or
    mode, is refused)."""
    sidecars = [sidecar(f) for f in flavors if f in _NRI_FLAVORS]
    devices = sorted({d for s in sidecars for d in RXDM_DEVICES[s.flavor]})
    keys = [f"{DEVICE_CONTAINER_KEY}{s.name}" for s in sidecars]
    device = "(" + "|".join(d.replace(".", "\\.") for d in devices) + ")"
    pattern = f"^(- path: {device}\\n)+$"
    is_device_key = f"(k == {cel(DEVICE_KEY)} || k.startsWith({cel(DEVICE_KEY + '/')}))"
    return {
        **on_resources(["CREATE", "UPDATE"], ["pods"]),
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
            },
            {"name": "volumes", "expression": "has(object.spec.volumes) ? object.spec.volumes : []"},
            {
                "name": "initContainers",
                "expression": "has(object.spec.initContainers) ? object.spec.initContainers : []",
            },
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
                "expression": "variables.deviceKeys.all(k, variables.initContainers.exists(c, "
                f"k == {cel(DEVICE_CONTAINER_KEY)} + c.name && ({_any_sidecar(sidecars)})))",
                "message": "a devices.gke.io/container.<name> annotation names an init container of the "
                "Pod that is the pinned GPUDirect sidecar (image, command, mounts as rendered, "
                "restartPolicy Always): the NRI device injector hands the GPUs to any container of that name",
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
        **on_resources(["CONNECT"], ["pods/exec", "pods/attach"]),
        "validations": [
            {
                "expression": f"has(object.container) && object.container != '' && "
                f"!(object.container in {cel(names)})",
                "message": f"exec and attach name their container, and never the GPUDirect sidecar "
                f"({', '.join(names)})",
            }
        ],
    }


def flavors_with_injector(flavors: list[GpuDirectFlavor]) -> list[GpuDirectFlavor]:
    """The flavours whose node software includes the NRI device injector (TCPX, TCPXO)."""
    return [f for f in flavors if f in _NRI_FLAVORS]
