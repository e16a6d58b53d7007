"""NvidiaDraDriver: NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu, formerly
NVIDIA/k8s-dra-driver-gpu) from its Helm chart, once per cluster: ComputeDomains (IMEX channels that
make NVLink span the VMs of a GB200/GB300 rack) and, where a pool hands its GPUs out through DRA
instead of GKE's device plugin, GPU allocation.

Sources (facts, not code):

* The chart at tag v0.4.0 (commit 6910a2be, 2026-05-15), deployments/helm/dra-driver-nvidia-gpu:
  values.yaml (vendored verbatim in tests/upstream/dra-driver-nvidia-gpu/, which the tests check
  our values against), templates/validation.yaml (GPU allocation needs `gpuResourcesEnabledOverride`:
  it must not run beside the device plugin on a node), Chart.yaml (`kubeVersion: >=1.32.0-0`);
  docs/install.md (the OCI chart, the namespace `dra-driver-nvidia-gpu`, "On GKE, include
  `nvidiaDriverRoot=/home/kubernetes/bin/nvidia`").
* GoogleCloudPlatform/cluster-toolkit@1047080375afbb44da4b596be314634e7486af4a:
  modules/management/kubectl-apply/main.tf (values for A4X: `nvidiaDriverRoot`,
  `resources.gpus.enabled: false`, the controller kept off GPU nodes, the kubelet plugin on the
  rack's nodes with their taints tolerated) and examples/gke-a4x/nvidia-dra-driver.yaml (the
  namespace's ResourceQuota for the system-*-critical priority classes).
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import K8sName, LabelValue
from ..core.common import NODEPOOL_LABEL, Problems, cut
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import (
    GKE_DRIVER_HOST_DIR,
    Toleration,
    TolerationSpec,
    app_labels,
    check_toleration,
    pod_security_labels,
)
from ..core.nodes import ACCELERATOR_LABEL
from ..core.validation import ArgsModel
from .claims import RESOURCE_API
from .driver_installer import InstallerVariant, installer_daemon_set, installer_name

DRA_DRIVER_CHART = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
DRA_DRIVER_VERSION = "0.4.0"
# The chart's default image, pinned here too (its tag defaults to "v" + appVersion).
DRA_DRIVER_IMAGE, DRA_DRIVER_IMAGE_TAG = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu", "v0.4.0"
DRA_DRIVER_NAMESPACE = "dra-driver-nvidia-gpu"
# The chart runs the controller and the kubelet plugin at these priorities; outside kube-system GKE
# admits such Pods only where a ResourceQuota scoped to them exists (cluster-toolkit's A4X example
# declares this one).
CRITICAL_PRIORITY_CLASSES = ["system-node-critical", "system-cluster-critical"]
CRITICAL_PODS_QUOTA = 100


class NvidiaDraDriverArgs(TypedDict):
    """What the driver allocates, and on which node pools its kubelet plugin runs."""

    node_pools: NotRequired[list[str]]
    """GKE node pools whose GPUs the driver hands out (DRA-GPU pools): its kubelet plugin runs on
    their nodes (node affinity on cloud.google.com/gke-nodepool). Defaults to none."""
    accelerators: NotRequired[list[str]]
    """GKE accelerators of the racks whose nodes join ComputeDomains (nvidia-gb200, nvidia-gb300):
    the kubelet plugin runs on their nodes too (cloud.google.com/gke-accelerator), as in
    cluster-toolkit's A4X blueprint. Defaults to none."""
    compute_domains: NotRequired[bool]
    """ComputeDomain support: the controller and the kubelet plugin's IMEX channels (multi-node
    NVLink on GB200/GB300 racks). Defaults to false."""
    gpus: NotRequired[bool]
    """GPU allocation (the DeviceClass gpu.nvidia.com). Only for pools whose nodes run no GKE device
    plugin (node label gke-no-default-nvidia-gpu-device-plugin=true): the two must not share a node.
    Defaults to false."""
    tolerations: NotRequired[list[Toleration]]
    """Tolerations for the pools' taints (the GPU taint among them), for the kubelet plugin.
    Defaults to the GPU taint only."""
    driver_installer_pools: NotRequired[list[str]]
    """Of `node_pools`, those (COS, x86) where the component installs the NVIDIA driver itself, GKE
    installing none on a DRA pool: Google's COS installer DaemonSet (container-engine-accelerators,
    `daemonset-preloaded-latest.yaml`: COS's latest driver) in kube-system, on these pools only.
    Defaults to none (install the driver yourself)."""
    driver_installer_a4x_pools: NotRequired[list[str]]
    """Of `node_pools`, the A4X (GB200) ones where it does the same with Google's A4X manifest
    (`daemonset-preloaded-latest-a4x.yaml`). Defaults to none."""


class _DriverSpec(ArgsModel):
    node_pools: list[K8sName] = Field(default_factory=list, max_length=64)
    accelerators: list[LabelValue] = Field(default_factory=list, max_length=16)
    compute_domains: bool = False
    gpus: bool = False
    tolerations: list[TolerationSpec] = Field(
        default_factory=lambda: [
            TolerationSpec(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
        ],
        max_length=32,
    )
    driver_installer_pools: list[K8sName] = Field(default_factory=list, max_length=64)
    driver_installer_a4x_pools: list[K8sName] = Field(default_factory=list, max_length=64)


def driver_rules(spec: _DriverSpec) -> list[str]:
    problems = Problems()
    if not spec.compute_domains and not spec.gpus:
        problems.add(
            "compute_domains",
            "false with gpus false leaves the driver nothing to do; set compute_domains, gpus or both",
        )
    if not spec.node_pools and not spec.accelerators:
        problems.add("node_pools", "required (or accelerators): the kubelet plugin must run on some nodes")
    if len(set(spec.node_pools)) != len(spec.node_pools):
        problems.add("node_pools", "lists a node pool twice; list each once")
    if len(set(spec.accelerators)) != len(spec.accelerators):
        problems.add("accelerators", "lists an accelerator twice; list each once")
    for j, toleration in enumerate(spec.tolerations):
        check_toleration(f"tolerations[{j}]", toleration, problems)
    installed: set[str] = set()
    for key in ("driver_installer_pools", "driver_installer_a4x_pools"):
        pools = getattr(spec, key)
        for pool in pools:
            if pool not in spec.node_pools:
                problems.add(
                    key,
                    f"{cut(pool)} is not one of node_pools: the installer is for the DRA-GPU pools, on "
                    "which GKE installs no driver; list it in node_pools or remove it here",
                )
            elif pool in installed:
                problems.add(key, f"{cut(pool)} is listed twice (or in both installer lists); list it once")
            installed.add(pool)
    return problems.items


def chart_values(spec: _DriverSpec) -> dict[str, Any]:
    """The chart's values (tests/upstream/dra-driver-nvidia-gpu/values.yaml names every key)."""
    tolerations = [t.model_dump(exclude_none=True) for t in spec.tolerations]
    for toleration in tolerations:
        if "toleration_seconds" in toleration:
            toleration["tolerationSeconds"] = toleration.pop("toleration_seconds")
    return {
        # GKE installs the driver here on its nodes (the chart's install doc).
        "nvidiaDriverRoot": GKE_DRIVER_HOST_DIR,
        # GKE 1.34+ serves resource.k8s.io/v1; pinned instead of read from the cluster, which an
        # offline render cannot ask.
        "resourceApiVersion": RESOURCE_API,
        "image": {"repository": DRA_DRIVER_IMAGE, "tag": DRA_DRIVER_IMAGE_TAG, "pullPolicy": "IfNotPresent"},
        "resources": {"gpus": {"enabled": spec.gpus}, "computeDomains": {"enabled": spec.compute_domains}},
        # The chart refuses GPU allocation without it: the pools listed run no GKE device plugin.
        "gpuResourcesEnabledOverride": spec.gpus,
        # The ComputeDomain controller stays on the CPU nodes (GKE labels GPU nodes with their accelerator).
        "controller": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": ACCELERATOR_LABEL, "operator": "DoesNotExist"}]}
                        ]
                    }
                }
            }
        },
        "kubeletPlugin": {
            # Instead of the chart's NFD / GPU Operator labels, which GKE's nodes do not all carry.
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        # Terms are ORed: the DRA-GPU pools, then the racks.
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": key, "operator": "In", "values": sorted(values)}]}
                            for key, values in (
                                (NODEPOOL_LABEL, spec.node_pools),
                                (ACCELERATOR_LABEL, spec.accelerators),
                            )
                            if values
                        ]
                    }
                }
            },
            "tolerations": tolerations,
        },
    }


class NvidiaDraDriver(GkeGpuComponent[_DriverSpec]):
    """NVIDIA's DRA driver from its Helm chart (pinned) in `dra-driver-nvidia-gpu`: the
    ComputeDomain CRDs, the controller (with ComputeDomains), the kubelet plugin on the listed node
    pools and the DeviceClasses (`compute-domain-*.nvidia.com`, and with GPU allocation
    `gpu.nvidia.com`). The namespace enforces Pod Security `privileged` (the kubelet plugin's
    containers are privileged and mount the host's kubelet and driver directories) and holds the
    ResourceQuota GKE needs before it admits the chart's system-*-critical Pods there.

    One per cluster: the CRDs and DeviceClasses are cluster-wide. Declare ComputeDomains and
    ResourceClaimTemplates after it (depends_on)."""

    namespace: pulumi.Output[str]
    """The driver's namespace: `dra-driver-nvidia-gpu`."""

    _args_model = _DriverSpec
    _args_rules = staticmethod(driver_rules)
    _args_type = NvidiaDraDriverArgs

    def __init__(
        self,
        name: str,
        /,
        args: NvidiaDraDriverArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        labels = app_labels("dra-driver-nvidia-gpu", component="dra-driver", version=DRA_DRIVER_VERSION)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=DRA_DRIVER_NAMESPACE,
                labels={
                    **labels,
                    **pod_security_labels("privileged", "baseline"),
                },
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        quota = k8s.core.v1.ResourceQuota(
            f"{name}-critical-pods",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="dra-driver-critical-pods", namespace=DRA_DRIVER_NAMESPACE, labels=labels
            ),
            spec=k8s.core.v1.ResourceQuotaSpecArgs(
                hard={"pods": str(CRITICAL_PODS_QUOTA)},
                scope_selector=k8s.core.v1.ScopeSelectorArgs(
                    match_expressions=[
                        k8s.core.v1.ScopedResourceSelectorRequirementArgs(
                            operator="In", scope_name="PriorityClass", values=CRITICAL_PRIORITY_CLASSES
                        )
                    ]
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
        )
        for variant, pools in (
            (InstallerVariant.COS, spec.driver_installer_pools),
            (InstallerVariant.COS_A4X, spec.driver_installer_a4x_pools),
        ):
            if pools:
                metadata, daemon_set = installer_daemon_set(variant, list(pools))
                k8s.apps.v1.DaemonSet(
                    f"{name}-{installer_name(variant)}",
                    metadata=metadata,
                    spec=daemon_set,
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.values = chart_values(spec)
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            chart=DRA_DRIVER_CHART,
            version=DRA_DRIVER_VERSION,
            namespace=DRA_DRIVER_NAMESPACE,
            values=self.values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, quota]),
        )
        self.namespace = pulumi.Output.from_input(DRA_DRIVER_NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
