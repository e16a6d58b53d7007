"""A model server whose replica fits one node: a Deployment of the server's Pod."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s

from ..core.k8s import selector_labels
from .rollout import fixed_replicas, replica_owner_annotations, rollout_plan

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec


def deployment(
    name: str,
    spec: InferenceServiceSpec,
    namespace: str,
    labels: dict[str, str],
    pod: k8s.core.v1.PodSpecArgs,
    *,
    annotations: dict[str, str] | None,
    timeout_s: int,
    opts: pulumi.ResourceOptions,
) -> k8s.apps.v1.Deployment:
    """`spec.replicas` Pods, or as many as the autoscaler says (`max_replicas`), rolled over as
    `rollout_plan` says."""
    plan = rollout_plan(spec)
    return k8s.apps.v1.Deployment(
        f"{name}-deployment",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=spec.name,
            namespace=namespace,
            labels=labels,
            # `pulumi up` waits for the replicas to be ready: a GPU node from zero, a ~10 GB image
            # and the weights take longer than the provider's default 10 minutes.
            annotations={"pulumi.com/timeoutSeconds": str(timeout_s), **replica_owner_annotations(spec)},
        ),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            replicas=fixed_replicas(spec),
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
            strategy=k8s.apps.v1.DeploymentStrategyArgs(
                type="RollingUpdate",
                rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(
                    max_surge=plan.max_surge, max_unavailable=plan.max_unavailable
                ),
            ),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels, annotations=annotations),
                spec=pod,
            ),
        ),
        opts=opts,
    )
