"""SampleWorkloads' args: the TypedDicts a caller writes, the model that checks them at the boundary,
and what follows from a checked sample (its Job's name, namespace and kubectl commands)."""

from collections import Counter
from enum import StrEnum
from typing import Annotated, NotRequired, TypedDict

from pydantic import Field

from ..core.arg_types import K8sName, LabelKey, LabelValue, enum_values, matching
from ..core.common import K8S_NAME, MAX_SHARED_CLIENTS, MAX_TIME_SLICING_REPLICAS, Problems
from ..core.k8s import Toleration, TolerationSpec, check_toleration
from ..core.model import DNS_LABEL
from ..core.validation import ArgsModel
from .model import SampleKind

# Kubernetes object names and label values: at most 63 characters.
MAX_OBJECT_NAME = 63
MPS_SUFFIX = "-mps"


class TargetSharing(StrEnum):
    """How the target's GPUs are shared."""

    TIME_SHARING = "TIME_SHARING"
    """GKE GPU time-sharing."""
    MPS = "MPS"
    """GKE's NVIDIA Multi-Process Service."""
    TIME_SLICING = "TIME_SLICING"
    """The NVIDIA device plugin's time-slicing."""


class GpuTarget(TypedDict):
    """Where a sample Pod runs and how it asks for its GPU."""

    name: str
    """The GPU pool or profile's name (a short name for an existing cluster's GPU nodes); part of
    the Job's name."""
    accelerator: NotRequired[str]
    """The GKE accelerator, e.g. nvidia-l4 (picks the PyTorch image). Defaults to unknown: images
    published for amd64 only then select amd64 nodes."""
    node_selector: NotRequired[dict[str, str]]
    """Node labels the Pods select. Defaults to none."""
    tolerations: NotRequired[list[Toleration]]
    """Tolerations for the GPU nodes' taints. Defaults to none."""
    gpus_per_pod: NotRequired[int]
    """nvidia.com/gpu each Pod requests (1 on shared GPUs). Defaults to 1."""
    sharing: NotRequired[TargetSharing]
    """How the GPUs are shared. Defaults to not shared."""
    shared_clients: NotRequired[int]
    """Clients per shared GPU (the sharing demo runs up to 4 of them at once). Defaults to 2."""
    required_node_labels: NotRequired[list[str]]
    """Node label keys that must exist (node affinity), e.g. cloud.google.com/gke-accelerator.
    Defaults to none."""
    gke_driver: NotRequired[bool]
    """GKE's driver, mounted at /usr/local/nvidia (false: the NVIDIA container toolkit injects it).
    Defaults to true."""
    runtime_class_name: NotRequired[str]
    """The RuntimeClass of the NVIDIA container runtime (generic clusters). Defaults to none."""
    dra_gpus: NotRequired[bool]
    """The target's GPUs come from NVIDIA's DRA driver: each Pod claims gpus_per_pod GPUs through a
    ResourceClaimTemplate of the DeviceClass gpu.nvidia.com instead of an nvidia.com/gpu limit (set
    gke_driver false: the driver injects the driver libraries). Defaults to false."""


class SampleWorkload(TypedDict):
    """One sample Job on one target."""

    kind: SampleKind
    """Which sample."""
    target: GpuTarget
    """Where it runs."""
    replicas: NotRequired[int]
    """sharing-demo only: Pods at once (2 to 48). Defaults to the target's shared clients, at most 4."""


class SampleWorkloadsArgs(TypedDict):
    """The samples and where their objects go."""

    workloads: list[SampleWorkload]
    """The samples (each kind at most once per target)."""
    namespace: NotRequired[str]
    """The samples' namespace (the MPS demo's is `<namespace>-mps`). Defaults to gpu-samples."""
    extra_labels: NotRequired[dict[str, str]]
    """Labels added to every object. Defaults to none."""


class GpuTargetSpec(ArgsModel):
    name: matching(  # type: ignore[valid-type]
        K8S_NAME, "lowercase letters, digits and hyphens, starting with a letter", max_length=MAX_OBJECT_NAME
    )
    accelerator: LabelValue | None = None
    node_selector: Annotated[dict[LabelKey, LabelValue], Field(default_factory=dict, max_length=64)]
    tolerations: Annotated[list[TolerationSpec], Field(default_factory=list, max_length=32)]
    gpus_per_pod: int = Field(1, ge=1, le=16)
    sharing: enum_values(TargetSharing) | None = None  # type: ignore[valid-type]
    shared_clients: int | None = Field(None, ge=2, le=MAX_TIME_SLICING_REPLICAS)
    required_node_labels: Annotated[list[LabelKey], Field(default_factory=list, max_length=16)]
    gke_driver: bool = True
    runtime_class_name: K8sName | None = None
    dra_gpus: bool = False


class SampleWorkloadSpec(ArgsModel):
    kind: enum_values(SampleKind)  # type: ignore[valid-type]
    target: GpuTargetSpec
    replicas: int | None = Field(None, ge=2, le=MAX_SHARED_CLIENTS)


class SampleWorkloadsSpec(ArgsModel):
    workloads: Annotated[list[SampleWorkloadSpec], Field(max_length=64)]
    namespace: Annotated[str, Field(max_length=MAX_OBJECT_NAME - len(MPS_SUFFIX), pattern=DNS_LABEL)] = (
        "gpu-samples"
    )
    extra_labels: Annotated[dict[LabelKey, LabelValue], Field(default_factory=dict, max_length=32)]


def object_name(workload: SampleWorkloadSpec) -> str:
    """The Job's name: the sample and the pool it runs on."""
    return f"{workload.kind}-{workload.target.name}"


def namespace_of(workload: SampleWorkloadSpec, base: str) -> str:
    """The namespace a sample runs in: an MPS client needs hostIPC, which only the 'privileged' Pod
    Security level allows, so it gets a namespace of its own and the others stay 'restricted'."""
    if workload.kind == "sharing-demo" and workload.target.sharing == "MPS":
        return f"{base}{MPS_SUFFIX}"
    return base


def sharing_clients(workload: SampleWorkloadSpec) -> int:
    """How many Pods the sharing demo runs at once (its Job's parallelism and completions)."""
    return workload.replicas or min(workload.target.shared_clients or 2, 4)


def sample_commands(workload: SampleWorkloadSpec, base_namespace: str) -> dict[str, str]:
    """kubectl commands that wait for a sample, print its log and list its Pods."""
    name = object_name(workload)
    namespace = namespace_of(workload, base_namespace)
    selector = f"app.kubernetes.io/instance={name}"
    if workload.kind == "sharing-demo":
        # Several Pods: `kubectl logs job/...` would show one of them.
        logs = f"kubectl logs -n {namespace} -l {selector} --all-containers --prefix --tail=-1"
    else:
        logs = f"kubectl logs -n {namespace} job/{name} --all-containers"
    return {
        "wait": f"kubectl wait -n {namespace} --for=condition=complete job/{name} --timeout=30m",
        "logs": logs,
        "pods": f"kubectl get pods -n {namespace} -l {selector} -o wide",
    }


def sample_rules(spec: SampleWorkloadsSpec) -> list[str]:
    """What Kubernetes or GKE would refuse, or what would silently do nothing."""
    problems = Problems()
    names = Counter(object_name(w) for w in spec.workloads)
    for i, workload in enumerate(spec.workloads):
        path = f"workloads[{i}]"
        name = object_name(workload)
        if names[name] > 1:
            problems.add(path, f"{workload.kind} on target {workload.target.name!r} is listed twice")
        if len(name) > MAX_OBJECT_NAME:
            problems.add(
                f"{path}.target.name",
                f"too long: the Job's name {name!r} would have {len(name)} characters; at most "
                f"{MAX_OBJECT_NAME}",
            )
        if workload.replicas is not None and workload.kind != "sharing-demo":
            problems.add(f"{path}.replicas", f"only allowed for sharing-demo (kind is {workload.kind})")
        target = workload.target
        if target.sharing and target.gpus_per_pod != 1:
            problems.add(
                f"{path}.target.gpus_per_pod",
                f"{target.gpus_per_pod} is not allowed on shared GPUs; a Pod gets one shared GPU",
            )
        if target.dra_gpus and target.sharing:
            problems.add(
                f"{path}.target.dra_gpus",
                "not allowed with sharing: GKE offers no time-sharing or MPS with DRA",
            )
        for j, toleration in enumerate(target.tolerations):
            check_toleration(f"{path}.target.tolerations[{j}]", toleration, problems)
    return problems.items
