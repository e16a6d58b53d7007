"""The NetworkPolicy of NcclAllReduce's Pods (workloads/nccl_allreduce.py), and the claim of a DRANET
pool's RDMA NICs that Kueue can count."""

from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from ..core.egress import dns_egress_rule
from ..gpudirect.flavors import GpuDirectFlavor, counted_claim_template_spec, rdma_nic_count


def network_policy_spec(peers: dict[str, str]) -> "k8s.networking.v1.NetworkPolicySpecArgs":
    """The test's Pods reach each other on any port of the Pod network (sshd, mpirun's and NCCL's
    bootstrap and, without GPUDirect, NCCL's data) and GKE's DNS resolvers (core/egress.py); nothing
    else in or out. GPUDirect's data NICs are outside the Pod network (their own VPCs), and a
    NetworkPolicy governs only the Pod's default interface (UNVERIFIED for GKE's Device-type
    networks: docs/security.md, "Egress").

    No egress to the metadata server: nothing in these Pods calls it. They mount no service account
    token and call no Google API (so Workload Identity is not used), and none of Google's GPUDirect
    manifests at container-engine-accelerators@992db812 (installers, NRI injector, the nccl-test Pods
    with their RxDM sidecar and gIB) references it; only the optional topology-scheduler's
    label-nodes-daemon.py reads it, which this program does not deploy. What the closed-source RxDM
    and gIB binaries do inside is UNVERIFIED: if a run logs metadata-server timeouts, that is the
    first place to look."""
    same = [
        k8s.networking.v1.NetworkPolicyPeerArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=peers)
        )
    ]
    return k8s.networking.v1.NetworkPolicySpecArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=peers),
        policy_types=["Ingress", "Egress"],
        ingress=[k8s.networking.v1.NetworkPolicyIngressRuleArgs(from_=same)],
        egress=[
            k8s.networking.v1.NetworkPolicyEgressRuleArgs(to=same),
            dns_egress_rule(),
        ],
    )


def rdma_template_name(flavor: GpuDirectFlavor) -> str:
    return f"rdma-{rdma_nic_count(flavor)}"


def rdma_claim_template_spec(flavor: GpuDirectFlavor) -> dict[str, Any]:
    """A ResourceClaimTemplate's `spec` for every MRDMA NIC of the node by count (ExactCount), not
    `default-rdma`'s allocationMode All, which Kueue 0.19.2 never admits (pkg/dra/claims.go:93-98): the
    teams' `rdma-<n>` (gpudirect/dranet.py) have the same."""
    return counted_claim_template_spec(rdma_nic_count(flavor))


def rdma_claim_template(
    name: str, namespace: str, labels: dict[str, str], flavor: GpuDirectFlavor, opts: pulumi.ResourceOptions
) -> k8s.resource.v1.ResourceClaimTemplate:
    """`rdma_claim_template_spec(flavor)` as the template `rdma-<n>` in the test's namespace."""
    return k8s.resource.v1.ResourceClaimTemplate(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=rdma_template_name(flavor), namespace=namespace, labels=labels
        ),
        spec=cast(Any, rdma_claim_template_spec(flavor)),
        opts=opts,
    )


def by_count(parts: dict[str, Any], flavor: GpuDirectFlavor) -> dict[str, Any]:
    """`dranet_pod_parts(flavor)` (gpudirect/dranet.py), the Pod claiming the NICs from
    `rdma_template_name(flavor)` instead of `default-rdma`."""
    template = rdma_template_name(flavor)
    claims = [{**claim, "resourceClaimTemplateName": template} for claim in parts["resourceClaims"]]
    return {**parts, "resourceClaims": claims}
