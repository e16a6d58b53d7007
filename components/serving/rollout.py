"""Who owns a model server's replica count, how a rollout replaces its replicas, and what a voluntary
disruption (a node drain, an upgrade) may take: for the Deployment and the LeaderWorkerSet alike.

Sources: docs/serving-research.md, "Objects (serving-objects)"."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import pulumi
import pulumi_kubernetes as k8s

from ..core.k8s import selector_labels

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec


def fixed_replicas(spec: InferenceServiceSpec) -> int | None:
    """The workload's `spec.replicas`: the fixed count, or none at all under an autoscaler. Kubernetes'
    HPA docs: an object an HPA manages leaves `spec.replicas` out, or every apply of the object puts
    the count back to it, killing replicas the HPA added."""
    return None if spec.max_replicas is not None else spec.replicas


def replica_owner_annotations(spec: InferenceServiceSpec) -> dict[str, str]:
    """`pulumi.com/patchForce` on a workload with a fixed count only. An HPA that has scaled owns
    `.spec.replicas` through the scale subresource (manager kube-controller-manager), so the apply
    that takes the count back when a range becomes fixed replicas fails with a field conflict unless
    forced (pulumi-kubernetes issues 2491, 2569). Under an autoscaler the object sends no count, and
    forcing would only override other managers' fields silently."""
    return {} if spec.max_replicas is not None else {"pulumi.com/patchForce": "true"}


class RolloutPlan(NamedTuple):
    max_surge: int
    max_unavailable: int
    outage: bool
    """Whether a rollout leaves no replica serving for a while (one replica and no room to surge)."""


def rollout_plan(spec: InferenceServiceSpec) -> RolloutPlan:
    """A surge replica first where the pool has room for one (`surge`), so no replica stops before its
    successor is ready; else one replica at a time, which with a single replica is an outage for as
    long as the new one takes to start (a node, the image, the weights)."""
    if spec.surge:
        return RolloutPlan(max_surge=1, max_unavailable=0, outage=False)
    return RolloutPlan(max_surge=0, max_unavailable=1, outage=spec.replicas < 2)


def disruption_budget(spec: InferenceServiceSpec) -> dict[str, int | str]:
    """What a voluntary disruption (a node drain: GKE's node upgrades, the cluster autoscaler, `kubectl
    drain`) may take of the service's Pods, so that it never takes the last replica that serves:

    - a service that runs two or more replicas at the least: `maxUnavailable: 1`, one Pod at a time (the
      eviction API allows one only while every expected Pod but it is healthy, so the last is never
      taken);
    - a service that may run one: `minAvailable`: one replica's Pods (a LeaderWorkerSet's replica is a
      group of Pods), so its last replica stays until another serves (the autoscaler's second replica,
      or one `kubectl rollout restart` starts first where the pool has surge room).

    `unhealthyPodEvictionPolicy: AlwaysAllow`: a Pod that is not Ready (a replacement still loading, a
    crashing server) may always be evicted, so a broken replica never holds a drain for ever (Kubernetes'
    advice, "Specifying a Disruption Budget"). The trade-off of a single replica is in docs/serving.md,
    "Disruptions": a drain waits for it (GKE's node upgrades up to an hour, then evict it anyway)."""
    budget: dict[str, int | str] = {"unhealthyPodEvictionPolicy": "AlwaysAllow"}
    if spec.replicas >= 2:
        budget["maxUnavailable"] = 1
    else:
        budget["minAvailable"] = spec.nodes_per_replica
    return budget


def pod_disruption_budget(
    name: str,
    spec: InferenceServiceSpec,
    namespace: str,
    labels: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.policy.v1.PodDisruptionBudget:
    """The service's budget (disruption_budget), over its Pods (every Pod of a LeaderWorkerSet's groups)."""
    budget = disruption_budget(spec)
    return k8s.policy.v1.PodDisruptionBudget(
        f"{name}-disruption-budget",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=namespace, labels=labels),
        spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
            max_unavailable=budget.get("maxUnavailable"),
            min_available=budget.get("minAvailable"),
            unhealthy_pod_eviction_policy=str(budget["unhealthyPodEvictionPolicy"]),
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
        ),
        opts=opts,
    )
