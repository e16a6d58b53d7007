"""The Pod parts GPUDirect's node software DaemonSets share (gpudirect/software.py): resources and the
node affinity that keeps them on the flavour's nodes."""

import pulumi_kubernetes as k8s

from ..core.common import NODEPOOL_LABEL
from ..gpu.scheduling import ACCELERATOR_LABEL, ARCH_LABEL
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
