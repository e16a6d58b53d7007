"""A team's namespaces: its own, at Pod Security `baseline` or `restricted` whatever its pools, and,
on a GPUDirect pool, `gpudirect-<team>` for the Pods that carry GPUDirect's host paths and sidecar.

Why two: Pod Security `baseline` refuses every hostPath volume and NET_ADMIN, which GPUDirect's Pods
need, and GKE's PodSecurity admission takes no exemptions (GKE's "Migrate from PodSecurityPolicy"
page: it "doesn't support custom configurations"). So those Pods run in a namespace of their own at
`privileged`, where the cluster's ValidatingAdmissionPolicy `gke-gpu-gpudirect-pods`
(gpudirect/admission.py) refuses everything `baseline` refuses except GPUDirect's exact exceptions.
The team's own namespace never admits a privileged Pod.

Both namespaces deny egress by default (`default-deny-egress`): their Pods reach GKE's DNS, each other
(a job's Pods: NCCL's bootstrap, torch.distributed's store), the metadata server (Workload
Identity's tokens) and what the team's `egress` entries open, nothing else (core/egress.py)."""

from collections.abc import Sequence
from typing import Annotated, Literal

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.egress import (
    DEFAULT_DENY_EGRESS_POLICY,
    cidr_egress_rule,
    dns_egress_rule,
    egress_policy_spec,
    metadata_server_egress_rules,
    pods_egress_rule,
)
from ..core.k8s import app_labels, pod_security_labels
from ..core.validation import ArgsModel

# Re-exported: the name is the batch rules' (batch_teams.py), which read no Kubernetes SDK.
from .batch_teams import gpudirect_namespace as gpudirect_namespace
from .egress_args import TeamEgress
from .model import NamespaceName, TeamMember, TeamName
from .team_access import declare_team_bindings

TEAM_LABEL = "gke-gpu/team"
# On a team's GPUDirect namespace (not TEAM_LABEL: the policy pack holds every TEAM_LABEL namespace
# below `privileged`, and this one to the admission policy's binding instead).
GPUDIRECT_TEAM_LABEL = "gke-gpu/gpudirect-team"
TeamPodSecurity = Literal["baseline", "restricted"]
POD_SECURITY_LEVELS: tuple[TeamPodSecurity, ...] = ("baseline", "restricted")
EGRESS_PROTOCOLS = ("TCP", "UDP", "SCTP")
MAX_EGRESS_ENTRIES = 20


class EgressSpec(ArgsModel):
    """A `TeamEgress`, validated (the ranges by `egress_problems`)."""

    cidr: Annotated[str, Field(min_length=1, max_length=18)]
    excluding: Annotated[
        list[Annotated[str, Field(max_length=18)]], Field(default_factory=list, max_length=50)
    ]
    ports: Annotated[list[Annotated[int, Field(ge=1, le=65535)]], Field(default_factory=list, max_length=50)]
    protocol: Literal[EGRESS_PROTOCOLS] = "TCP"  # type: ignore[valid-type]

    def as_egress(self) -> TeamEgress:
        return {
            "cidr": self.cidr,
            "excluding": self.excluding,
            "ports": self.ports,
            "protocol": self.protocol,
        }


class TeamSpec(ArgsModel):
    """A `BatchTeam` (batch_teams.py), validated."""

    name: TeamName
    namespace: NamespaceName
    create_namespace: bool = True
    pod_security: TeamPodSecurity = "baseline"
    gpudirect: bool = False
    egress: Annotated[list[EgressSpec], Field(default_factory=list, max_length=MAX_EGRESS_ENTRIES)]
    members: Annotated[list[TeamMember], Field(default_factory=list, max_length=100)]

    @property
    def namespaces(self) -> list[str]:
        """Where its LocalQueues are: its namespace and, on a GPUDirect pool, its GPUDirect one."""
        return [self.namespace, *([gpudirect_namespace(self.name)] if self.gpudirect else [])]


def declare_team(
    parent: pulumi.Resource, name: str, team: TeamSpec, role: pulumi.Resource | None
) -> list[pulumi.Resource]:
    """The team's namespaces (its own when created; its GPUDirect one), NetworkPolicies that admit only
    their own Pods, and its members' RoleBindings to the team `role` in both: what its LocalQueues wait
    for."""
    created: list[pulumi.Resource] = []
    egress = [e.as_egress() for e in team.egress]
    if team.create_namespace:
        labels = team_labels(team.namespace, team.name, team.pod_security)
        resource = f"{name}-team-{team.name}-namespace"
        created += declare_namespace(parent, resource, team.namespace, labels, egress)
    if team.gpudirect:
        namespace = gpudirect_namespace(team.name)
        labels = gpudirect_labels(namespace, team.name)
        resource = f"{name}-team-{team.name}-gpudirect-namespace"
        created += declare_namespace(parent, resource, namespace, labels, egress)
    if team.members and role is not None:
        created += declare_team_bindings(
            parent, f"{name}-team-{team.name}", team.namespaces, team.members, [role, *created]
        )
    return created


def team_egress_rules(entries: Sequence[TeamEgress]) -> list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]:
    """A team namespace's egress: GKE's DNS, the namespace's own Pods, the metadata server, and the
    team's entries."""
    return [
        dns_egress_rule(),
        pods_egress_rule(),
        *metadata_server_egress_rules(),
        *(
            cidr_egress_rule(
                e["cidr"], list(e.get("excluding", [])), list(e.get("ports", [])), e.get("protocol", "TCP")
            )
            for e in entries
        ),
    ]


def declare_namespace(
    parent: pulumi.Resource,
    resource_name: str,
    namespace: str,
    labels: dict[str, str],
    egress: Sequence[TeamEgress] = (),
) -> list[pulumi.Resource]:
    """A namespace, a NetworkPolicy that admits traffic only from its own Pods, and one that denies
    egress but to what `team_egress_rules` lists."""
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
    default_deny_egress = k8s.networking.v1.NetworkPolicy(
        resource_name.removesuffix("-namespace") + "-egress-policy",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=DEFAULT_DENY_EGRESS_POLICY,
            namespace=namespace,
            labels=app_labels(namespace, component="gpu-team"),
        ),
        spec=egress_policy_spec(team_egress_rules(egress)),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[created]),
    )
    return [created, same_namespace, default_deny_egress]


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
