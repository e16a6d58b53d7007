"""Conventions shared by every Kubernetes object the program declares, and the toleration type the
components' args share."""

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, NotRequired, TypedDict

import pulumi_kubernetes as k8s

from .arg_types import LabelKey, LabelValue, enum_values
from .common import Problem
from .validation import ArgsModel

PART_OF = "gke-gpu"
MANAGED_BY = "pulumi"
# Where the GKE device plugin mounts the GKE-installed driver inside GPU containers.
GKE_DRIVER_MOUNT = "/usr/local/nvidia"
# Where GKE installs the NVIDIA driver on its COS nodes (the host side of that mount).
GKE_DRIVER_HOST_DIR = "/home/kubernetes/bin/nvidia"
# GKE's ComputeClass custom resource (GpuComputeClass, GpuCapacityLadder, HyperdiskMlTransferClass).
COMPUTE_CLASS_API_VERSION = "cloud.google.com/v1"
# The uid and gid non-root Pods run as: distroless's "nonroot", far from the host's human users
# (1000 is the first one on most Linux hosts) and from the images' own accounts.
NONROOT_ID = 65532
# Capabilities Pod Security `baseline` lets a container add (Kubernetes "Pod Security Standards",
# Baseline, Capabilities); anything else needs `privileged` (the all-reduce's level, the admission
# policy's CEL for GPUDirect namespaces).
BASELINE_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)


def app_labels(
    name: str, *, component: str, instance: str | None = None, version: str | None = None
) -> dict[str, str]:
    """The recommended `app.kubernetes.io/*` labels."""
    labels = {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": instance or name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }
    if version:
        labels["app.kubernetes.io/version"] = version[:63]
    return labels


def selector_labels(labels: dict[str, str]) -> dict[str, str]:
    """The immutable subset of app labels used in selectors (never the version)."""
    keys = ("app.kubernetes.io/name", "app.kubernetes.io/instance")
    return {k: labels[k] for k in keys}


def image_version(image: str) -> str:
    """The tag of a pinned image reference, for the `app.kubernetes.io/version` label."""
    return image.rsplit(":", 1)[-1]


def restricted_pod_security_context(user: int = NONROOT_ID) -> "k8s.core.v1.PodSecurityContextArgs":
    """Pod-level settings of the Kubernetes 'restricted' Pod Security Standard, as `user` (uid and
    gid, also the group that owns the Pod's volumes)."""
    return k8s.core.v1.PodSecurityContextArgs(
        run_as_non_root=True,
        run_as_user=user,
        run_as_group=user,
        fs_group=user,
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def restricted_container_security_context() -> "k8s.core.v1.SecurityContextArgs":
    """Container-level settings of the 'restricted' standard, plus a read-only root filesystem."""
    return k8s.core.v1.SecurityContextArgs(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def restricted_container_security_patch() -> "k8s.core.v1.SecurityContextPatchArgs":
    """The same settings, for a container of a server-side apply patch."""
    return k8s.core.v1.SecurityContextPatchArgs(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        capabilities=k8s.core.v1.CapabilitiesPatchArgs(drop=["ALL"]),
        seccomp_profile=k8s.core.v1.SeccompProfilePatchArgs(type="RuntimeDefault"),
    )


# The Jobs the program runs once (samples, tests): `pulumi up` does not wait for them, their Pod
# template carries their script's hash (a new script makes a new template, which a Job cannot take in
# place, so Pulumi replaces the Job), and they are deleted a day after they end.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
SCRIPT_HASH_ANNOTATION = "gke-gpu/script-sha256"
JOB_TTL_SECONDS = 24 * 3600  # long enough to read the log the morning after


def deny_all_network_policy_spec() -> "k8s.networking.v1.NetworkPolicySpecArgs":
    """Every Pod of the namespace (the empty selector), no ingress and no egress rule: all traffic in
    and out is denied, DNS included. Images are pulled by the kubelet, not the Pod, so they still are.
    """
    return k8s.networking.v1.NetworkPolicySpecArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(),
        policy_types=["Ingress", "Egress"],
    )


def require_node_labels(keys: Sequence[str]) -> "k8s.core.v1.AffinityArgs | None":
    """Node affinity requiring each label key to exist on the node; None for no keys."""
    if not keys:
        return None
    return k8s.core.v1.AffinityArgs(
        node_affinity=k8s.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                node_selector_terms=[
                    k8s.core.v1.NodeSelectorTermArgs(
                        match_expressions=[
                            k8s.core.v1.NodeSelectorRequirementArgs(key=key, operator="Exists")
                            for key in keys
                        ]
                    )
                ]
            )
        )
    )


# --------------------------------------------------------------------------------------------------
# Tolerations in the components' args (DcgmExporter, SampleWorkloads): Kubernetes' own fields.


class TolerationOperator(StrEnum):
    """How a toleration matches a taint."""

    EXISTS = "Exists"
    """Any value of the key (leave `value` out)."""
    EQUAL = "Equal"
    """The taint's value equals `value`."""


class TolerationEffect(StrEnum):
    """The taint effect a toleration tolerates (Kubernetes' names)."""

    NO_SCHEDULE = "NoSchedule"
    """New Pods are not scheduled on the node."""
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    """The scheduler avoids the node."""
    NO_EXECUTE = "NoExecute"
    """Running Pods are evicted too."""


class Toleration(TypedDict):
    """A Kubernetes toleration (core/v1 Toleration) with snake_case keys."""

    key: NotRequired[str]
    """The taint key, e.g. nvidia.com/gpu. Left out with operator Exists: every taint."""
    operator: NotRequired[TolerationOperator]
    """Exists or Equal. Defaults to Equal, as in Kubernetes."""
    value: NotRequired[str]
    """The taint value to match (operator Equal only). Defaults to empty."""
    effect: NotRequired[TolerationEffect]
    """The effect to tolerate. Left out: every effect."""
    toleration_seconds: NotRequired[int]
    """How long a Pod stays bound after a NoExecute taint appears. Left out: forever."""


class TolerationSpec(ArgsModel):
    key: LabelKey | None = None
    operator: enum_values(TolerationOperator) | None = None  # type: ignore[valid-type]
    value: LabelValue | None = None
    effect: enum_values(TolerationEffect) | None = None  # type: ignore[valid-type]
    toleration_seconds: int | None = None


def toleration_problems(path: str, toleration: TolerationSpec) -> list[str]:
    """What the Kubernetes API would refuse in a toleration (problem lines under `path`)."""
    problems: list[str] = []
    if toleration.operator == "Exists" and toleration.value:
        problems.append(Problem(f"{path}.value", "not allowed with operator Exists"))
    if not toleration.key and toleration.operator != "Exists":
        problems.append(Problem(f"{path}.key", "required unless operator is Exists"))
    if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
        problems.append(Problem(f"{path}.toleration_seconds", "only allowed with effect NoExecute"))
    return problems


def toleration_args(toleration: TolerationSpec) -> "k8s.core.v1.TolerationArgs":
    """The Kubernetes toleration, with only the fields that were given."""
    return k8s.core.v1.TolerationArgs(**toleration.model_dump(exclude_none=True))


def pod_security_level(pod: dict[str, Any]) -> tuple[str, list[str]]:
    """The least Pod Security level a Pod spec that runs as root passes ('baseline' or 'privileged';
    never 'restricted'), and why it is not lower (the all-reduce's namespace is labelled with it)."""
    reasons: list[str] = []
    for volume in pod.get("volumes", []):
        if "hostPath" in volume:
            reasons.append(f"hostPath {volume['hostPath']['path']}")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            reasons.append(key)
    for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        security = container.get("securityContext") or {}
        if security.get("privileged"):
            reasons.append(f"{container['name']} privileged")
        added = sorted(set((security.get("capabilities") or {}).get("add", [])) - set(BASELINE_CAPABILITIES))
        if added:
            reasons.append(f"{container['name']} adds {', '.join(added)}")
    return ("privileged" if reasons else "baseline"), reasons


def pod_security_labels(enforce: str, report: str) -> dict[str, str]:
    """Pod Security admission's labels: `enforce`, and `report` for warn and audit."""
    return {
        "pod-security.kubernetes.io/enforce": enforce,
        "pod-security.kubernetes.io/warn": report,
        "pod-security.kubernetes.io/audit": report,
    }
