"""Kueue's and JobSet's charts, and Kueue's Configuration as the Kueue chart's
`managerConfig.controllerManagerConfigYaml` takes it: the chart's own default (charts/kueue/values.yaml,
kubernetes-sigs/kueue tag v0.19.2, commit 8eab6877), and what this program adds to it
(apis/config/v1beta2/configuration_types.go at the same tag): the DeviceClasses Kueue counts as a
resource (DRA GPUs), MultiKueue's block on a fleet's manager, and the ClusterQueue resource metrics a
fleet's dashboard reads."""

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pydantic import Field

from ..core.common import GPU_RESOURCE
from ..core.k8s import app_labels, pod_security_labels
from ..dra.claims import CHANNEL_DEVICE_CLASS
from ..gpudirect.flavors import DRANET_DEVICE_CLASS
from .model import KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES as KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES

# The chart's integrations at v0.19.2.
FRAMEWORKS = [
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/rayservice",
    "ray.io/raycluster",
    "jobset.x-k8s.io/jobset",
    "workload.codeflare.dev/appwrapper",
    "trainer.kubeflow.org/trainjob",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
]
# The quota resource DRA-claimed GPUs are counted as: the device plugin's name, so a pool's
# ClusterQueue quota counts its GPUs whichever way its Pods get them. Kueue 0.19.2 leaves a Workload
# whose Pods claim an unmapped DeviceClass inadmissible (pkg/dra/claims.go, "not mapped in DRA
# configuration"); KueueDRAIntegration is Beta and on (pkg/features/kube_features.go). UNVERIFIED on a
# cluster that Kueue accepts a mapping to a name that is also an extended resource.
DRA_GPU_RESOURCE = GPU_RESOURCE
# Quota resources for the other DRA claims the program's queued workloads make, each with the one
# DeviceClass it counts. Kueue 0.19.2 charges an ExactCount request `count` units of its class's
# mapped name, per Pod (pkg/dra/claims.go:99-101,227; pkg/workload/workload.go:679-697), and a
# ClusterQueue that does not cover that name admits nothing asking for it
# (pkg/scheduler/flavorassigner/flavorassigner.go:1069-1071). A ComputeDomain's IMEX channel: one a
# Pod (dra/claims.py). DRANET's RDMA NICs: the node's count, claimed ExactCount (workloads/
# nccl_allreduce_network.py), since Kueue refuses DRANET's `default-rdma` (All, claims.go:93-98).
CHANNEL_RESOURCE = "resource.nvidia.com/compute-domain-channel"
RDMA_NIC_RESOURCE = "networking.gke.io/mrdma-nic"
DRA_QUOTA_CLASSES = {CHANNEL_RESOURCE: CHANNEL_DEVICE_CLASS, RDMA_NIC_RESOURCE: DRANET_DEVICE_CLASS}
DraQuotaResource = Literal["resource.nvidia.com/compute-domain-channel", "networking.gke.io/mrdma-nic"]
DraQuotaPerGpu = dict[DraQuotaResource, Annotated[int, Field(ge=1, le=64)]]
# The rest of the block as Kueue defaults it (defaults.go:51-52, 110-117): readiness lost after start is
# given as long again (recoveryTimeout), admission is not blocked, and an evicted Workload is requeued
# with an exponential backoff from 60 s up to 3600 s, without limit (no backoffLimitCount).
_REQUEUING = {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}


def wait_for_pods_ready(minutes: int) -> dict[str, Any]:
    """Kueue's `waitForPodsReady` block with `minutes` as its timeout and the rest as Kueue v0.19.2
    defaults it, written out so that the render shows what the controller runs with and a change of
    Kueue's defaults cannot change it silently (configuration_types.go:302-329, 400-440)."""
    timeout = f"{minutes}m"
    return {
        "timeout": timeout,
        "recoveryTimeout": timeout,
        "blockAdmission": False,
        "requeuingStrategy": dict(_REQUEUING),
    }


def kueue_configuration(
    dra_device_classes: list[str] | None = None,
    multikueue: dict[str, Any] | None = None,
    *,
    cluster_queue_metrics: bool = False,
    dra_quota: Sequence[str] | None = None,
    pods_ready_timeout_minutes: int | None = None,
) -> dict[str, Any]:
    """The chart's default Configuration, with `resources.deviceClassMappings` for DRA GPU claims
    (Kueue charts `exactly.count` of each ExactCount request: site/.../dynamic_resource_allocation.md),
    each of `dra_quota` (names of DRA_QUOTA_CLASSES) mapped to its DeviceClass,
    MultiKueue's block where given, and with `cluster_queue_metrics` the ClusterQueue resource usage
    and quota metrics (`metrics.enableClusterQueueResources`, ControllerMetrics in
    configuration_types.go; the chart's default leaves it commented out), and with
    `pods_ready_timeout_minutes` Kueue's `waitForPodsReady` written out (`wait_for_pods_ready`: an
    admitted Workload whose Pods are not all ready in time is evicted and requeued). Without it the
    block is left out and Kueue's own default applies (KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES)."""
    configuration: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
    if cluster_queue_metrics:
        configuration["metrics"]["enableClusterQueueResources"] = True
    if pods_ready_timeout_minutes is not None:
        configuration["waitForPodsReady"] = wait_for_pods_ready(pods_ready_timeout_minutes)
    mappings = []
    if dra_device_classes:
        mappings.append({"name": DRA_GPU_RESOURCE, "deviceClassNames": sorted(dra_device_classes)})
    for resource in sorted(dra_quota or []):
        mappings.append({"name": resource, "deviceClassNames": [DRA_QUOTA_CLASSES[resource]]})
    if mappings:
        configuration["resources"] = {"deviceClassMappings": mappings}
    if multikueue is not None:
        configuration["multiKueue"] = multikueue
    return configuration


def kueue_values(
    dra_device_classes: list[str],
    cluster_queue_metrics: bool,
    dra_quota: Sequence[str],
    pods_ready_timeout_minutes: int | None = None,
) -> dict[str, Any] | None:
    """The Kueue chart's values for a cluster's queues; None (the chart's default) when nothing is added."""
    if not (dra_device_classes or cluster_queue_metrics or dra_quota or pods_ready_timeout_minutes):
        return None
    return chart_values(
        kueue_configuration(
            dra_device_classes,
            cluster_queue_metrics=cluster_queue_metrics,
            dra_quota=dra_quota,
            pods_ready_timeout_minutes=pods_ready_timeout_minutes,
        )
    )


def chart_values(configuration: dict[str, Any]) -> dict[str, Any]:
    """The Kueue chart's values for a Configuration."""
    return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)}}


def controller_chart(
    parent: pulumi.Resource,
    name: str,
    app: str,
    chart: str,
    version: str,
    namespace: str,
    values: dict[str, Any] | None = None,
) -> k8s.helm.v4.Chart:
    """A batch controller's chart (Kueue, JobSet) in its own namespace."""
    ns = k8s.core.v1.Namespace(
        f"{name}-{app}-namespace",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=namespace,
            labels={
                **app_labels(app, component="batch", version=version),
                # The controllers' Pods need no host access (UNVERIFIED that they pass restricted,
                # which warnings and audit entries report).
                **pod_security_labels("baseline", "restricted"),
            },
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return k8s.helm.v4.Chart(
        f"{name}-{app}",
        chart=chart,
        version=version,
        namespace=namespace,
        values=values,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[ns]),
    )
