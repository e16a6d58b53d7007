"""A team's namespaces: its own, at Pod Security `baseline` or `restricted` whatever its pools, and,
on a GPUDirect pool, `gpudirect-<team>` for the Pods that carry GPUDirect's host paths and sidecar.

Why two: Pod Security `baseline` refuses every hostPath volume and NET_ADMIN, which GPUDirect's Pods
need, and GKE's PodSecurity admission takes no exemptions (GKE's "Migrate from PodSecurityPolicy"
page: it "doesn't support custom configurations"). So those Pods run in a namespace of their own at
`privileged`, where the cluster's ValidatingAdmissionPolicy `gke-gpu-gpudirect-pods`
(gpudirect/admission.py) refuses everything `baseline` refuses except GPUDirect's exact exceptions.
The team's own namespace never admits a privileged Pod."""

from typing import Literal

import pulumi
import pulumi_kubernetes as k8s

from ..core.k8s import app_labels

TEAM_LABEL = "gke-gpu/team"
# On a team's GPUDirect namespace (not TEAM_LABEL: the policy pack holds every TEAM_LABEL namespace
# below `privileged`, and this one to the admission policy's binding instead).
GPUDIRECT_TEAM_LABEL = "gke-gpu/gpudirect-team"
GPUDIRECT_NAMESPACE_PREFIX = "gpudirect-"
TeamPodSecurity = Literal["baseline", "restricted"]
POD_SECURITY_LEVELS: tuple[TeamPodSecurity, ...] = ("baseline", "restricted")


def gpudirect_namespace(team: str) -> str:
    """The namespace of a team's GPUDirect Pods."""
    return f"{GPUDIRECT_NAMESPACE_PREFIX}{team}"


def pod_security_labels(enforce: str, report: str) -> dict[str, str]:
    """Pod Security admission's labels: `enforce`, and `report` for warn and audit."""
    return {
        "pod-security.kubernetes.io/enforce": enforce,
        "pod-security.kubernetes.io/warn": report,
        "pod-security.kubernetes.io/audit": report,
    }


def declare_namespace(
    parent: pulumi.Resource,
    resource_name: str,
    namespace: str,
    labels: dict[str, str],
) -> list[pulumi.Resource]:
    """A namespace and a NetworkPolicy that admits traffic only from its own Pods."""
    created = k8s.core.v1.Namespace(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace, labels=labels),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    same_namespace = k8s.networking.v1.NetworkPolicy(
        resource_name.removesuffix("-namespace") + "-network-policy",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name="same-namespace-only",
            namespace=namespace,
            labels=app_labels(namespace, component="gpu-team"),
        ),
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(),
            policy_types=["Ingress"],
            ingress=[
                k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=[
                        k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs())
                    ]
                )
            ],
        ),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[created]),
    )
    return [created, same_namespace]


def team_labels(namespace: str, team: str, pod_security: str) -> dict[str, str]:
    """A team namespace's labels: enforced at `pod_security`, warnings and audit at `restricted`."""
    return {
        **app_labels(namespace, component="gpu-team"),
        TEAM_LABEL: team,
        **pod_security_labels(pod_security, "restricted"),
    }


def gpudirect_labels(namespace: str, team: str) -> dict[str, str]:
    """A team's GPUDirect namespace: `privileged` at Pod Security (the only level that admits host
    paths), confined by the admission policy; warnings and audit at `baseline` report what it let
    through."""
    return {
        **app_labels(namespace, component="gpu-team-gpudirect"),
        GPUDIRECT_TEAM_LABEL: team,
        **pod_security_labels("privileged", "baseline"),
    }
