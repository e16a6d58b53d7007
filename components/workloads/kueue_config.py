"""Kueue's and JobSet's charts, and Kueue's Configuration as the Kueue chart's
`managerConfig.controllerManagerConfigYaml` takes it: the chart's own default (charts/kueue/values.yaml,
kubernetes-sigs/kueue tag v0.19.2, commit 8eab6877), and what this program adds to it
(apis/config/v1beta2/configuration_types.go at the same tag): the DeviceClasses Kueue counts as a
resource (DRA GPUs), MultiKueue's block on a fleet's manager, and the ClusterQueue resource metrics a
fleet's dashboard reads."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from ..core.common import GPU_RESOURCE
from ..core.k8s import app_labels, pod_security_labels
from ..dra.claims import CHANNEL_DEVICE_CLASS

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
# The quota resource a ComputeDomain's IMEX channel claims are counted as (one per Pod: the channel
# template asks for one device, dra/claims.py). Kueue 0.19.2 charges an ExactCount request `count`
# units of its mapping's name (pkg/dra/claims.go:99-101,227) and a ClusterQueue that does not cover
# that name admits nothing asking for it (pkg/scheduler/flavorassigner/flavorassigner.go:1069-1071).
CHANNEL_RESOURCE = "resource.nvidia.com/compute-domain-channel"


def kueue_configuration(
    dra_device_classes: list[str] | None = None,
    multikueue: dict[str, Any] | None = None,
    *,
    cluster_queue_metrics: bool = False,
    compute_domain_channels: bool = False,
) -> dict[str, Any]:
    """The chart's default Configuration, with `resources.deviceClassMappings` for DRA GPU claims
    (Kueue charts `exactly.count` of each ExactCount request: site/.../dynamic_resource_allocation.md),
    with `compute_domain_channels` the ComputeDomain channel class counted as `CHANNEL_RESOURCE`,
    MultiKueue's block where given, and with `cluster_queue_metrics` the ClusterQueue resource usage
    and quota metrics (`metrics.enableClusterQueueResources`, ControllerMetrics in
    configuration_types.go; the chart's default leaves it commented out)."""
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
    mappings = []
    if dra_device_classes:
        mappings.append({"name": DRA_GPU_RESOURCE, "deviceClassNames": sorted(dra_device_classes)})
    if compute_domain_channels:
        mappings.append({"name": CHANNEL_RESOURCE, "deviceClassNames": [CHANNEL_DEVICE_CLASS]})
    if mappings:
        configuration["resources"] = {"deviceClassMappings": mappings}
    if multikueue is not None:
        configuration["multiKueue"] = multikueue
    return configuration


def kueue_values(
    dra_device_classes: list[str], cluster_queue_metrics: bool, compute_domain_channels: bool
) -> dict[str, Any] | None:
    """The Kueue chart's values for a cluster's queues; None (the chart's default) when nothing is added."""
    if not (dra_device_classes or cluster_queue_metrics or compute_domain_channels):
        return None
    return chart_values(
        kueue_configuration(
            dra_device_classes,
            cluster_queue_metrics=cluster_queue_metrics,
            compute_domain_channels=compute_domain_channels,
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
