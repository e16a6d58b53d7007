"""What GKE's nodes carry that several domains read: the node labels GKE sets (its documented node
labels, and Kubernetes' well-known architecture label), and an extra NIC's VPC and subnet, which a GPU
pool attaches (gpu) and GPUDirect's and G4's networks create (gpudirect).

`NodeNetwork` is a schema type (the Pulumi analyzer reads its docstrings), so this module does not
use `from __future__ import annotations`.
"""

from typing import Any, Literal, TypedDict

import pulumi

ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# The node's CPU architecture (Kubernetes' well-known label): amd64, or arm64 on A4X's Grace hosts.
ARCH_LABEL = "kubernetes.io/arch"
SPOT_LABEL = "cloud.google.com/gke-spot"
SHARING_STRATEGY_LABEL = "cloud.google.com/gke-gpu-sharing-strategy"
MAX_CLIENTS_LABEL = "cloud.google.com/gke-max-shared-clients-per-gpu"
PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"
DRIVER_LABEL = "cloud.google.com/gke-gpu-driver-version"
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"


class NodeNetwork(TypedDict):
    """An extra NIC of every node: the VPC and subnet it attaches to."""

    network: pulumi.Input[str]
    """The VPC's name."""
    subnetwork: pulumi.Input[str]
    """The subnet's name (in the cluster's region)."""


def _plain(nic: Any) -> Any:
    """A NIC as the provider takes it: a checked one (core/arg_types.py NodeNetworkSpec, its names
    possibly Outputs) as a NodeNetwork; a mapping as it is."""
    if isinstance(nic, dict):
        return nic
    return NodeNetwork(network=nic.network, subnetwork=nic.subnetwork)


def node_network_list(networks: "pulumi.Input[list[Any]] | None") -> pulumi.Input[list[NodeNetwork]]:
    """The extra NICs as the provider takes them: the list (each NIC a NodeNetwork), or the Output of
    one as it is."""
    if networks is None:
        return []
    if isinstance(networks, list):
        return [_plain(nic) for nic in networks]
    return networks


def node_network_at(
    networks: "pulumi.Input[list[Any]]", index: int, key: Literal["network", "subnetwork"]
) -> pulumi.Input[str]:
    """One field (`network` or `subnetwork`) of the NIC at `index`: from the list, or from the Output of
    the whole list."""
    if isinstance(networks, pulumi.Output):
        return networks.apply(lambda nics: nics[index][key])
    # Input also admits an Awaitable, which no caller passes (the args hold a list or an Output).
    nic: NodeNetwork = _plain(networks[index])  # type: ignore[index]
    return nic[key]
