"""A disaggregated service's objects (InferenceService with `disaggregation`), in its namespace: per
role, the workload (a Deployment of one-node replicas, or a LeaderWorkerSet of an expert-parallel
replica's nodes, every Pod alike as llm-d's wide-EP manifests), its PodDisruptionBudget and its
PodMonitoring; the claim templates its Pods' GPUs (a DRA pool) and GPU NICs (a DRANET pool) are made
from; and the NetworkPolicies between the roles (decode's sidecar and NIXL reaching prefill, an
expert-parallel replica's ranks reaching each other).

The roles' Pods: role_parts.py; their layout: roles.py; docs/serving.md, "Disaggregated prefill and
decode", says what each object is and where it comes from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pulumi
import pulumi_kubernetes as k8s

from ..core.k8s import selector_labels
from ..dra.claims import gpu_claim_template_name, gpu_claim_template_spec
from .gpu_nics import nic_claim_template_spec, pod_nics
from .leader_worker_set import API_VERSION as LWS_API_VERSION
from .leader_worker_set import KIND as LWS_KIND
from .leader_worker_set import group_spec
from .model import DECODE, PREFILL
from .role_parts import nic_claim, role_pod, uses_nics
from .roles import ROLE_LABEL, RoleLayout, role_layouts
from .rollout import disruption_budget, rollout_plan

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec


def role_labels(labels: dict[str, str], role: str) -> dict[str, str]:
    """A role's Pods' labels: the server's, and llm-d's role label its endpoint picker filters by."""
    return {**labels, ROLE_LABEL: role}


def role_selector(labels: dict[str, str], role: str) -> dict[str, str]:
    return {**selector_labels(labels), ROLE_LABEL: role}


def claim_templates(
    spec: InferenceServiceSpec, labels: dict[str, str]
) -> list[tuple[str, str, dict[str, Any]]]:
    """(resource suffix, name, spec) of the templates the roles' Pods claim from: their GPUs on a DRA
    pool (`gpu-<n>`, n a Pod's GPUs), their NICs on a DRANET pool (`rdma-<n>`); each once."""
    templates: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for layout in role_layouts(spec):
        if spec.dra_gpus:
            name = gpu_claim_template_name(layout.gpus_per_pod)
            templates[name] = (f"{name}-claim", name, gpu_claim_template_spec(layout.gpus_per_pod))
        nics = uses_nics(spec, layout)
        if nics is not None and (claim := nic_claim(nics, layout.gpus_per_pod)) is not None:
            count = pod_nics(nics, layout.gpus_per_pod)
            templates[claim[1]] = (f"{claim[1]}-claim", claim[1], nic_claim_template_spec(count))
    return list(templates.values())


def declare_roles(
    component: pulumi.Resource,
    name: str,
    spec: InferenceServiceSpec,
    namespace: str,
    labels: dict[str, str],
    *,
    timeout_s: int,
    depends_on: list[pulumi.Resource],
) -> None:
    """Every role's claim templates, workload, budget and scrape, and the roles' NetworkPolicies."""
    in_namespace = pulumi.ResourceOptions(parent=component, depends_on=depends_on)
    templates = [
        k8s.resource.v1.ResourceClaimTemplate(
            f"{name}-{suffix}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=template, namespace=namespace, labels=labels),
            spec=cast(Any, body),
            opts=in_namespace,
        )
        for suffix, template, body in claim_templates(spec, labels)
    ]
    workloads = pulumi.ResourceOptions(parent=component, depends_on=[*depends_on, *templates])
    layouts = role_layouts(spec)
    for layout in layouts:
        _workload(name, spec, layout, namespace, labels, timeout_s, workloads)
        _budget(name, spec, layout, namespace, labels, in_namespace)
        k8s.apiextensions.CustomResource(
            f"{name}-{layout.role}-pod-monitoring",
            api_version="monitoring.googleapis.com/v1",
            kind="PodMonitoring",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=layout.workload_name(spec.name), namespace=namespace, labels=labels
            ),
            spec={
                "selector": {"matchLabels": role_selector(labels, layout.role)},
                "endpoints": [
                    {"port": port, "path": "/metrics", "interval": "15s"} for port in layout.vllm_ports
                ],
            },
            opts=in_namespace,
        )
    for suffix, policy_name, policy in role_policies(spec, labels, layouts):
        k8s.networking.v1.NetworkPolicy(
            f"{name}-{suffix}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, namespace=namespace, labels=labels),
            spec=policy,
            opts=in_namespace,
        )


def _workload(
    name: str,
    spec: InferenceServiceSpec,
    layout: RoleLayout,
    namespace: str,
    labels: dict[str, str],
    timeout_s: int,
    opts: pulumi.ResourceOptions,
) -> pulumi.Resource:
    """The role's Deployment (a replica on one node) or LeaderWorkerSet (an expert-parallel replica over
    several), its replicas fixed."""
    pod, annotations = role_pod(spec, layout)
    plan = rollout_plan(spec.model_copy(update={"replicas": layout.replicas}))
    template = k8s.core.v1.PodTemplateSpecArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(labels=role_labels(labels, layout.role), annotations=annotations),
        spec=pod,
    )
    metadata = k8s.meta.v1.ObjectMetaArgs(
        name=layout.workload_name(spec.name),
        namespace=namespace,
        labels=role_labels(labels, layout.role),
        annotations={"pulumi.com/timeoutSeconds": str(timeout_s)},
    )
    if layout.nodes == 1:
        return k8s.apps.v1.Deployment(
            f"{name}-{layout.role}-deployment",
            metadata=metadata,
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=layout.replicas,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=role_selector(labels, layout.role)),
                strategy=k8s.apps.v1.DeploymentStrategyArgs(
                    type="RollingUpdate",
                    rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(
                        max_surge=plan.max_surge, max_unavailable=plan.max_unavailable
                    ),
                ),
                template=template,
            ),
            opts=opts,
        )
    metadata.annotations = {
        **cast(dict[str, str], metadata.annotations),
        "pulumi.com/waitFor": "condition=Available",
    }
    return k8s.apiextensions.CustomResource(
        f"{name}-{layout.role}-leader-worker-set",
        api_version=LWS_API_VERSION,
        kind=LWS_KIND,
        metadata=metadata,
        # One template for the leader and the workers (LWS uses the worker's for the leader when it has
        # none), as llm-d's wide-EP manifests: every Pod runs its own ranks and the supervisor.
        spec=group_spec(layout.replicas, plan, layout.nodes, {"workerTemplate": template}),
        opts=opts,
    )


def _budget(
    name: str,
    spec: InferenceServiceSpec,
    layout: RoleLayout,
    namespace: str,
    labels: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.policy.v1.PodDisruptionBudget:
    """The role's budget (rollout.disruption_budget, a replica being its nodes' Pods)."""
    budget = disruption_budget(
        spec.model_copy(
            update={
                "replicas": layout.replicas,
                "gpus_per_replica": layout.gpus,
                "gpus_per_node": layout.gpus_per_pod,
            }
        )
    )
    return k8s.policy.v1.PodDisruptionBudget(
        f"{name}-{layout.role}-disruption-budget",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=layout.workload_name(spec.name), namespace=namespace, labels=labels
        ),
        spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
            max_unavailable=budget.get("maxUnavailable"),
            min_available=budget.get("minAvailable"),
            unhealthy_pod_eviction_policy=str(budget["unhealthyPodEvictionPolicy"]),
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=role_selector(labels, layout.role)),
        ),
        opts=opts,
    )


def _tcp(ports: list[int]) -> list[k8s.networking.v1.NetworkPolicyPortArgs]:
    return [k8s.networking.v1.NetworkPolicyPortArgs(port=port, protocol="TCP") for port in ports]


def prefill_ports(layouts: list[RoleLayout]) -> list[int]:
    """What decode reaches on prefill: its API ports (the sidecar's prefill request) and its NIXL side
    channel ports (the KV transfer's handshake, one a data-parallel rank)."""
    prefill = next(layout for layout in layouts if layout.role == PREFILL)
    first, last = prefill.nixl_ports
    return [*prefill.api_ports, *range(first, last + 1)]


def _peers(labels: dict[str, str], role: str) -> list[k8s.networking.v1.NetworkPolicyPeerArgs]:
    return [
        k8s.networking.v1.NetworkPolicyPeerArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=role_selector(labels, role))
        )
    ]


def role_policies(
    spec: InferenceServiceSpec, labels: dict[str, str], layouts: list[RoleLayout]
) -> list[tuple[str, str, k8s.networking.v1.NetworkPolicySpecArgs]]:
    """The policies between the roles, as (resource suffix, name, spec), added to the server's own and
    to the namespace's default-deny egress:
    - `<name>-kv-transfer`: prefill admits decode on its API and NIXL ports (prefill_ports); with the KV
      cache over TCP, on every port (UCX's TCP transport listens on ports it picks);
    - `<name>-kv-transfer-egress`: decode reaches prefill there;
    - `<name>-<role>-ranks` for an expert-parallel replica over several nodes: the role's Pods (every
      replica's: it selects by role) reach each other on every port (vLLM's data-parallel RPC on 5555,
      torch.distributed's and Gloo's stores, NCCL's sockets: ports the engine picks)."""
    disaggregation = spec.disaggregation
    assert disaggregation is not None, "only for a disaggregated service"
    ports = None if disaggregation.kv_transport == "tcp" else _tcp(prefill_ports(layouts))
    selector = k8s.meta.v1.LabelSelectorArgs
    policies = [
        (
            "kv-transfer-policy",
            f"{spec.name}-kv-transfer",
            k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=selector(match_labels=role_selector(labels, PREFILL)),
                policy_types=["Ingress"],
                ingress=[
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(from_=_peers(labels, DECODE), ports=ports)
                ],
            ),
        ),
        (
            "kv-transfer-egress",
            f"{spec.name}-kv-transfer-egress",
            k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=selector(match_labels=role_selector(labels, DECODE)),
                policy_types=["Egress"],
                egress=[
                    k8s.networking.v1.NetworkPolicyEgressRuleArgs(to=_peers(labels, PREFILL), ports=ports)
                ],
            ),
        ),
    ]
    for layout in layouts:
        if layout.nodes > 1:
            group = _peers(labels, layout.role)
            policies.append(
                (
                    f"{layout.role}-ranks",
                    f"{layout.workload_name(spec.name)}-ranks",
                    k8s.networking.v1.NetworkPolicySpecArgs(
                        pod_selector=selector(match_labels=role_selector(labels, layout.role)),
                        policy_types=["Ingress", "Egress"],
                        ingress=[k8s.networking.v1.NetworkPolicyIngressRuleArgs(from_=group)],
                        egress=[k8s.networking.v1.NetworkPolicyEgressRuleArgs(to=group)],
                    ),
                )
            )
    return policies
