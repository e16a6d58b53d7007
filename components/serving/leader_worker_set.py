"""A model server whose replica spans nodes: a LeaderWorkerSet (kubernetes-sigs/lws, API v1) whose
every group is one replica, one Pod per node. The leader runs vLLM's API server (the Service, the
probes and the scraper see only leaders); the workers run vLLM headless, its ranks on their nodes.
Both are the single-node server's Pod (InferenceService._pod_spec: its security context, weights
volume, resources, node selector and tolerations), with the multi-node arguments (server_parts).

Sources and what is UNVERIFIED: docs/serving.md, "Multi-node replicas"."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, cast

import pulumi
import pulumi_kubernetes as k8s

from ..core.k8s import selector_labels
from .rollout import RolloutPlan, fixed_replicas, replica_owner_annotations, rollout_plan

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
# Ours, on each Pod of a LeaderWorkerSet: `leader` or `worker`.
ROLE_LABEL = "gke-gpu/role"
# What LWS puts on the Pods of one group (the leader's by its Pod webhook, a worker's in its
# StatefulSet's template, so at creation): lws v0.10.0 api/leaderworkerset/v1/leaderworkerset_types.go,
# pkg/controllers/pod_controller.go.
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
ZONE_LABEL = "topology.kubernetes.io/zone"


def group_name(service: str) -> str:
    """The LeaderWorkerSet's name, `<service>-lws`: LWS names its headless Service (the Pods' DNS
    subdomain, which LWS_LEADER_ADDRESS is in) after it, so it must not be the ClusterIP Service's."""
    return f"{service}-lws"


def serving_selector(spec: InferenceServiceSpec, labels: dict[str, str]) -> dict[str, str]:
    """The Pods that answer on the API port, for the Service and the scraper: every Pod of a
    Deployment, the leaders of a LeaderWorkerSet (a worker runs no API server)."""
    selector = selector_labels(labels)
    return {**selector, ROLE_LABEL: "leader"} if spec.nodes_per_replica > 1 else selector


def scale_target(spec: InferenceServiceSpec) -> k8s.autoscaling.v2.CrossVersionObjectReferenceArgs:
    """What the autoscaler scales. A LeaderWorkerSet has the scale subresource: the HPA adds and
    removes whole groups and reads its Pods metric from the leaders (status.hpaPodSelector)."""
    if spec.nodes_per_replica > 1:
        return k8s.autoscaling.v2.CrossVersionObjectReferenceArgs(
            api_version=API_VERSION, kind=KIND, name=group_name(spec.name)
        )
    return k8s.autoscaling.v2.CrossVersionObjectReferenceArgs(
        api_version="apps/v1", kind="Deployment", name=spec.name
    )


def leader_worker_set(
    name: str,
    spec: InferenceServiceSpec,
    namespace: str,
    labels: dict[str, str],
    pod: k8s.core.v1.PodSpecArgs,
    *,
    annotations: dict[str, str] | None,
    timeout_s: int,
    opts: pulumi.ResourceOptions,
) -> k8s.apiextensions.CustomResource:
    """The LeaderWorkerSet: `spec.replicas` groups (or the autoscaler's count) of `nodes_per_replica`
    Pods, `pod` (the server's Pod with the leader's arguments) for the leader and, derived from it,
    the workers'."""
    nodes, plan = spec.nodes_per_replica, rollout_plan(spec)

    def template(role: str, pod_spec: k8s.core.v1.PodSpecArgs) -> k8s.core.v1.PodTemplateSpecArgs:
        return k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels={**labels, ROLE_LABEL: role}, annotations=annotations),
            spec=pod_spec,
        )

    return k8s.apiextensions.CustomResource(
        f"{name}-leader-worker-set",
        api_version=API_VERSION,
        kind=KIND,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=group_name(spec.name),
            namespace=namespace,
            labels=labels,
            annotations={
                # `pulumi up` waits for a group to serve (LWS's Available condition): nodes from zero,
                # the image and the weights on each, as for the Deployment.
                "pulumi.com/waitFor": "condition=Available",
                "pulumi.com/timeoutSeconds": str(timeout_s),
                **replica_owner_annotations(spec),
            },
        ),
        spec=group_spec(
            fixed_replicas(spec),
            plan,
            nodes,
            {
                "leaderTemplate": template("leader", pod),
                "workerTemplate": template("worker", _worker_pod(pod, labels)),
            },
        ),
        opts=opts,
    )


def group_spec(
    replicas: int | None, plan: RolloutPlan, size: int, templates: dict[str, k8s.core.v1.PodTemplateSpecArgs]
) -> dict[str, Any]:
    """A LeaderWorkerSet's spec: `replicas` groups (None: the autoscaler's count) of `size` Pods made from
    `templates` (`leaderTemplate`, `workerTemplate`), started together, a restarted Pod recreating its
    group, rolled over as `plan` says."""
    return {
        **({} if replicas is None else {"replicas": replicas}),
        # The workers start with the leader, not once it is ready: the leader is ready only when the
        # whole engine, workers included, has loaded the model.
        "startupPolicy": "LeaderCreated",
        # A whole surge group first where the pool has room for its nodes, else one group at a time.
        "rolloutStrategy": {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {
                "maxUnavailable": plan.max_unavailable,
                "maxSurge": plan.max_surge,
            },
        },
        "leaderWorkerTemplate": {
            "size": size,
            # A restarted container or Pod recreates its whole group: the engine's ranks cannot rejoin a
            # running group one at a time.
            "restartPolicy": "RecreateGroupOnPodRestart",
            **templates,
        },
    }


def _worker_pod(leader: k8s.core.v1.PodSpecArgs, labels: dict[str, str]) -> k8s.core.v1.PodSpecArgs:
    """The leader's Pod without the API server: vLLM with --headless (it starts only the engine's
    ranks on its node), no port and no HTTP probe to answer; and in its leader's zone, so a group's
    traffic stays in one zone (a required Pod affinity to its own group's leader, the group found by
    the key LWS labels it with: matchLabelKeys, GA in Kubernetes 1.33)."""
    (vllm,) = cast(list[k8s.core.v1.ContainerArgs], leader.containers)  # _pod_spec's plain list
    container = copy.copy(vllm)
    container.args = [*cast(list[str], vllm.args), "--headless"]
    container.ports = None
    container.startup_probe = container.readiness_probe = container.liveness_probe = None
    pod = copy.copy(leader)
    pod.containers = [container]
    leaders = k8s.meta.v1.LabelSelectorArgs(match_labels={**selector_labels(labels), ROLE_LABEL: "leader"})
    pod.affinity = k8s.core.v1.AffinityArgs(
        pod_affinity=k8s.core.v1.PodAffinityArgs(
            required_during_scheduling_ignored_during_execution=[
                k8s.core.v1.PodAffinityTermArgs(
                    label_selector=leaders, match_label_keys=[GROUP_KEY_LABEL], topology_key=ZONE_LABEL
                )
            ]
        )
    )
    return pod
