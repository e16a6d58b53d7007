"""A model server whose replica fits one node: a Deployment of the server's Pod."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s

from ..core.k8s import selector_labels

if TYPE_CHECKING:
    from .inference_service import InferenceServiceSpec


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
    """`spec.replicas` Pods, replaced one at a time in a rolling update without a surge replica (a
    surge needs a spare GPU)."""
    return k8s.apps.v1.Deployment(
        f"{name}-deployment",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=spec.name,
            namespace=namespace,
            labels=labels,
            annotations={
                # `pulumi up` waits for the replicas to be ready: a GPU node from zero, a ~10 GB
                # image and the weights take longer than the provider's default 10 minutes.
                "pulumi.com/timeoutSeconds": str(timeout_s),
                # An autoscaler that ran owns .spec.replicas (the scale subresource): going back to
                # fixed replicas must take it over, not fail on the conflict (pulumi-kubernetes
                # issues 2491, 2569).
                "pulumi.com/patchForce": "true",
            },
        ),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            replicas=spec.replicas,
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
            strategy=k8s.apps.v1.DeploymentStrategyArgs(
                type="RollingUpdate",
                rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(max_surge=0, max_unavailable=1),
            ),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels, annotations=annotations),
                spec=pod,
            ),
        ),
        opts=opts,
    )
