"""The Pod parts GPUDirect's node software DaemonSets share (gpudirect/software.py): resources and the
node affinity that keeps them on the flavour's nodes; and the Device Networks a node's extra NICs are
offered to Pods through (GPUDirect's, G4's second network)."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ..core.common import NODEPOOL_LABEL
from ..core.nodes import ACCELERATOR_LABEL, ARCH_LABEL
from .flavors import FlavorSpec


def resources(
    cpu: str, memory: str, cpu_limit: str, memory_limit: str
) -> "k8s.core.v1.ResourceRequirementsArgs":
    return k8s.core.v1.ResourceRequirementsArgs(
        requests={"cpu": cpu, "memory": memory}, limits={"cpu": cpu_limit, "memory": memory_limit}
    )


def node_affinity(flavor: FlavorSpec, pools: list[str] | None) -> "k8s.core.v1.AffinityArgs":
    """The flavour's accelerators (and, off amd64, its architecture) and, when given, only these node
    pools (all must hold)."""
    expressions = [
        k8s.core.v1.NodeSelectorRequirementArgs(
            key=ACCELERATOR_LABEL, operator="In", values=list(flavor.accelerators)
        )
    ]
    if flavor.arch != "amd64":
        expressions.append(
            k8s.core.v1.NodeSelectorRequirementArgs(key=ARCH_LABEL, operator="In", values=[flavor.arch])
        )
    if pools:
        expressions.append(
            k8s.core.v1.NodeSelectorRequirementArgs(key=NODEPOOL_LABEL, operator="In", values=list(pools))
        )
    return k8s.core.v1.AffinityArgs(
        node_affinity=k8s.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                node_selector_terms=[k8s.core.v1.NodeSelectorTermArgs(match_expressions=expressions)]
            )
        )
    )


NETWORK_API = "networking.gke.io/v1"


def device_network(
    parent: pulumi.Resource,
    resource_name: str,
    network_name: str,
    params: dict[str, Any],
    labels: dict[str, str],
) -> None:
    """A GKE Network of type Device and its GKENetworkParamSet (`params`: vpc, vpcSubnet, deviceMode), as
    GKE's multi-network docs and cluster-toolkit's gke-cluster module write them; the Network after its
    parameters."""
    created = k8s.apiextensions.CustomResource(
        f"{resource_name}-params",
        api_version=NETWORK_API,
        kind="GKENetworkParamSet",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=network_name, labels=labels),
        spec=params,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    k8s.apiextensions.CustomResource(
        f"{resource_name}-network",
        api_version=NETWORK_API,
        kind="Network",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=network_name, labels=labels),
        spec={
            "type": "Device",
            "parametersRef": {
                "group": "networking.gke.io",
                "kind": "GKENetworkParamSet",
                "name": network_name,
            },
        },
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[created]),
    )
