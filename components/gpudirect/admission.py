"""GpuDirectAdmission: the cluster's admission policies that confine the privilege GPUDirect's Pods
need to the namespaces and the sidecar that need it, and the GPU networks to the teams with quota on
their pools (the CEL: admission_cel.py, admission_baseline.py, admission_networks.py)."""

from typing import Annotated, Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import K8sName, enum_values
from ..core.common import Problem
from ..core.component import GkeGpuComponent
from ..core.k8s import app_labels
from ..core.validation import ArgsModel
from .admission_cel import (
    DEVICE_POLICY,
    POD_POLICY,
    SIDECAR_EXEC_POLICY,
    binding,
    device_policy,
    flavors_with_injector,
    pod_policy,
    sidecar_exec_policy,
)
from .admission_networks import NETWORK_POLICY, NIC_CLAIM_POLICY, network_policy, nic_claim_policy
from .flavors import GpuDirectFlavor

MAX_NAMESPACES = 200


class GpuDirectAdmissionArgs(TypedDict):
    """Where GPUDirect's Pods may run, and which flavours' sidecars they carry."""

    flavors: list[GpuDirectFlavor]
    """The cluster's GPUDirect flavours (each once; none where only `network_namespaces` is given, such
    as G4's second network)."""
    namespaces: list[str]
    """The namespaces whose Pods the Pod policy confines (`baseline` plus GPUDirect's exceptions):
    every namespace where GPUDirect's Pods run, and the teams' namespaces beside them (none: no Pod
    policy; the device annotation policy still refuses the annotations everywhere)."""
    device_namespaces: list[str]
    """The namespaces where Pods may carry the NRI device injector's annotations (TCPX, TCPXO)."""
    network_namespaces: NotRequired[dict[str, list[str]]]
    """The cluster's GPU Networks (GPUDirect's multi-networking Networks, G4's second network), each with
    the namespaces whose Pods may name it in `networking.gke.io/interfaces` (an empty list: none). Named
    anywhere else, a Pod is refused (`gke-gpu-gpu-networks`, bound cluster-wide). Defaults to none (no
    such policy)."""
    nic_claim_namespaces: NotRequired[list[str]]
    """Where the cluster has DRANET pools: the namespaces whose ResourceClaims and templates may request
    GKE's DRANET DeviceClasses (`gke-gpu-gpu-nic-claims`, bound cluster-wide). Defaults to none (no such
    policy)."""


_FLAVORS = len(GpuDirectFlavor)
MAX_NETWORKS = 64


class _Spec(ArgsModel):
    flavors: Annotated[list[enum_values(GpuDirectFlavor)], Field(max_length=_FLAVORS)]  # type: ignore[valid-type]
    namespaces: Annotated[list[K8sName], Field(max_length=MAX_NAMESPACES)]
    device_namespaces: Annotated[list[K8sName], Field(max_length=MAX_NAMESPACES)]
    network_namespaces: Annotated[
        dict[K8sName, Annotated[list[K8sName], Field(max_length=MAX_NAMESPACES)]],
        Field(max_length=MAX_NETWORKS),
    ] = Field(default_factory=dict)
    nic_claim_namespaces: Annotated[list[K8sName], Field(max_length=MAX_NAMESPACES)] | None = None


def _rules(spec: _Spec) -> list[str]:
    problems: list[str] = []
    for key in ("flavors", "namespaces", "device_namespaces"):
        values = [str(v) for v in getattr(spec, key)]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            problems.append(Problem(key, f"lists {', '.join(twice)} more than once"))
    outside = sorted(set(spec.device_namespaces) - set(spec.namespaces))
    if outside:
        problems.append(
            Problem(
                "device_namespaces",
                f"{', '.join(outside)} must also be in namespaces (the device annotations are for "
                "the Pods the Pod policy confines)",
            )
        )
    if spec.device_namespaces and not flavors_with_injector(list(spec.flavors)):
        problems.append(
            Problem("device_namespaces", "must be empty without TCPX or TCPXO (no NRI device injector)")
        )
    if not spec.flavors and not spec.network_namespaces:
        problems.append(
            Problem("flavors", "is empty and so is network_namespaces: there is nothing to confine")
        )
    if not spec.flavors and spec.namespaces:
        problems.append(Problem("namespaces", "must be empty without GPUDirect flavours"))
    for network, namespaces in spec.network_namespaces.items():
        twice = sorted({n for n in namespaces if namespaces.count(n) > 1})
        if twice:
            problems.append(
                Problem(f"network_namespaces.{network}", f"lists {', '.join(twice)} more than once")
            )
    if spec.nic_claim_namespaces is not None:
        claims = list(spec.nic_claim_namespaces)
        twice = sorted({n for n in claims if claims.count(n) > 1})
        if twice:
            problems.append(Problem("nic_claim_namespaces", f"lists {', '.join(twice)} more than once"))
    return problems


class GpuDirectAdmission(GkeGpuComponent[_Spec]):
    """ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1: GKE 1.30 or later) and their
    Deny bindings:

    * `gke-gpu-gpudirect-pods`, bound to `namespaces`: Pod Security `baseline` in CEL, plus exactly
      GPUDirect's exceptions (the pinned RxDM sidecar's NET_ADMIN and host /sys and /proc/sys, the
      NCCL and driver host directories read-only, TCPXO's aperture devices, IPC_LOCK beside the
      TCPX sidecar). Those namespaces may then enforce Pod Security `privileged` (the only level
      that admits the host paths) without admitting a privileged, host-PID or host-root Pod.
    * with TCPX or TCPXO, `gke-gpu-device-annotations`, bound to every namespace: the NRI device
      injector's `devices.gke.io` annotations only in `device_namespaces`, only for the sidecar, only
      its devices; and `gke-gpu-gpudirect-sidecar-exec`, bound to `namespaces`: no exec or attach
      into the sidecar.
    * with `network_namespaces`, `gke-gpu-gpu-networks`, bound to every namespace: a Pod names a GPU
      Network in `networking.gke.io/interfaces` only in that Network's namespaces; with
      `nic_claim_namespaces`, `gke-gpu-gpu-nic-claims`: claims of GKE's DRANET DeviceClasses only there.

    Not managed here: RBAC (who may create Pods: the teams' roles, workloads/team_access.py), and the
    namespaces' own Pod Security labels."""

    policy_names: pulumi.Output[list[str]]
    """The ValidatingAdmissionPolicies declared."""

    _args_model = _Spec
    _args_rules = staticmethod(_rules)

    def __init__(
        self, name: str, args: GpuDirectAdmissionArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        spec = self._begin(name, args, opts)
        flavors = [GpuDirectFlavor(f) for f in spec.flavors]
        namespaces = list(spec.namespaces)
        declared: list[tuple[str, dict[str, Any], list[str] | None]] = []
        if namespaces:
            declared.append((POD_POLICY, pod_policy(flavors), namespaces))
        if flavors_with_injector(flavors):
            # Cluster-wide whenever the injector runs, even where no namespace may use it.
            declared.append((DEVICE_POLICY, device_policy(flavors, list(spec.device_namespaces)), None))
            if namespaces:
                declared.append((SIDECAR_EXEC_POLICY, sidecar_exec_policy(flavors), namespaces))
        if spec.network_namespaces:
            allowed = {str(k): [str(n) for n in v] for k, v in spec.network_namespaces.items()}
            declared.append((NETWORK_POLICY, network_policy(allowed), None))
        if spec.nic_claim_namespaces is not None:
            declared.append((NIC_CLAIM_POLICY, nic_claim_policy(list(spec.nic_claim_namespaces)), None))
        self.policies: list[k8s.admissionregistration.v1.ValidatingAdmissionPolicy] = []
        self.bindings: list[k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding] = []
        for policy_name, policy_spec, bound in declared:
            self._declare(name, policy_name, policy_spec, binding(policy_name, bound))
        self.policy_names = pulumi.Output.from_input([p for p, _, _ in declared])
        self.register_outputs({"policyNames": self.policy_names})

    def _declare(
        self, name: str, policy_name: str, policy_spec: dict[str, Any], binding_spec: dict[str, Any]
    ) -> None:
        labels = app_labels(policy_name, component="gpudirect-admission")
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-{policy_name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, labels=labels),
            spec=cast(Any, policy_spec),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.policies.append(policy)
        self.bindings.append(
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-{policy_name}-binding",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, labels=labels),
                spec=cast(Any, binding_spec),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
            )
        )
