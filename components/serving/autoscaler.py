"""A model server's HorizontalPodAutoscaler: on vLLM's queue (a Pods metric) or on its GPUs' duty
cycle (an External metric), both read through the Custom Metrics Stackdriver Adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s

from .leader_worker_set import scale_target
from .server_parts import CONTAINER

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec

# vLLM's waiting requests as Managed Prometheus stores them, named for the custom metrics adapter
# ('/' becomes '|'): GKE's own vLLM autoscaling sample (docs/serving-research.md 7).
QUEUE_METRIC = "prometheus.googleapis.com|vllm:num_requests_waiting|gauge"
# The GPUs' duty cycle per container (GKE system metrics, every 60 s), named for the custom metrics
# adapter; External metric names must be lowercase (docs/serving.md, "Scaling on GPU duty cycle").
DUTY_CYCLE_METRIC = "kubernetes.io|container|accelerator|duty_cycle"


def autoscaling_metric(spec: InferenceServiceSpec, namespace: str) -> k8s.autoscaling.v2.MetricSpecArgs:
    """The autoscaler's metric. The queue: a Pods metric, averaged over the replicas. The duty
    cycle: GKE's per-container GPU metric as an External metric (Pods metrics are read per Pod, and
    this one is per container and GPU) over the service's vLLM containers; an External AverageValue
    is the series' sum over the replicas, so the target is the mean per GPU times a replica's GPUs."""
    if spec.scale_on != "gpu":
        return k8s.autoscaling.v2.MetricSpecArgs(
            type="Pods",
            pods=k8s.autoscaling.v2.PodsMetricSourceArgs(
                metric=k8s.autoscaling.v2.MetricIdentifierArgs(name=QUEUE_METRIC),
                target=k8s.autoscaling.v2.MetricTargetArgs(
                    type="AverageValue", average_value=f"{spec.queue_target:g}"
                ),
            ),
        )
    # The cluster too: the adapter adds no cluster filter to External metrics (k8s-stackdriver
    # translator, GetExternalMetricRequest), and another cluster of the project may serve the same name.
    selector = {
        "resource.labels.cluster_name": spec.cluster_name,
        "resource.labels.namespace_name": namespace,
        "resource.labels.container_name": CONTAINER,
    }
    return k8s.autoscaling.v2.MetricSpecArgs(
        type="External",
        external=k8s.autoscaling.v2.ExternalMetricSourceArgs(
            metric=k8s.autoscaling.v2.MetricIdentifierArgs(
                name=DUTY_CYCLE_METRIC, selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector)
            ),
            target=k8s.autoscaling.v2.MetricTargetArgs(
                type="AverageValue", average_value=f"{spec.duty_cycle_target * spec.gpus_per_replica:g}"
            ),
        ),
    )


def horizontal_pod_autoscaler(
    name: str,
    spec: InferenceServiceSpec,
    namespace: str,
    labels: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.autoscaling.v2.HorizontalPodAutoscaler:
    """The service's autoscaler between `replicas` and `max_replicas`: up at once, down after 5 quiet
    minutes. `opts` parents it to the InferenceService."""
    assert spec.max_replicas is not None
    return k8s.autoscaling.v2.HorizontalPodAutoscaler(
        f"{name}-autoscaler",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=namespace, labels=labels),
        spec=k8s.autoscaling.v2.HorizontalPodAutoscalerSpecArgs(
            scale_target_ref=scale_target(spec),
            min_replicas=spec.replicas,
            max_replicas=spec.max_replicas,
            metrics=[autoscaling_metric(spec, namespace)],
            behavior=k8s.autoscaling.v2.HorizontalPodAutoscalerBehaviorArgs(
                scale_up=k8s.autoscaling.v2.HPAScalingRulesArgs(stabilization_window_seconds=0),
                scale_down=k8s.autoscaling.v2.HPAScalingRulesArgs(stabilization_window_seconds=300),
            ),
        ),
        opts=opts,
    )
