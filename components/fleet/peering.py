"""The route from the fleet's manager to the private control-plane endpoint of a worker reached by token
(`access: token`; a worker of the fleet is reached through Connect Gateway and needs none): VPC Network
Peering between the manager's VPC and the worker's, both ways (a peering is active only once each
network has its half: pulumi_gcp `compute.NetworkPeering`)."""

from typing import Any, TypedDict

import pulumi
from pulumi_gcp import compute

from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.validation import ArgsModel, Deferrable
from .model import WorkerName


class FleetPeeringArgs(TypedDict):
    worker: str
    """The worker's name: the peerings are `fleet-<worker>` on the manager's VPC and `fleet-manager` on
    the worker's."""
    manager_network: pulumi.Input[str]
    """The manager's VPC (self link)."""
    worker_network: pulumi.Input[str]
    """The worker's VPC (self link)."""


class _Spec(ArgsModel):
    worker: WorkerName
    manager_network: Deferrable[str]
    worker_network: Deferrable[str]


class FleetPeering(GkeGpuComponent[_Spec]):
    """Both halves of the peering between the manager's and a worker's VPC (their ranges must not
    overlap: the fleet's rules check them). The second half waits for the first: GCP runs one
    peering operation at a time on a network."""

    _args_model = _Spec

    def __init__(
        self,
        name: str,
        /,
        args: FleetPeeringArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        out = compute.NetworkPeering(
            f"{name}-out",
            name=f"fleet-{spec.worker}",
            network=args["manager_network"],
            peer_network=args["worker_network"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.back = compute.NetworkPeering(
            f"{name}-back",
            name="fleet-manager",
            network=args["worker_network"],
            peer_network=args["manager_network"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[out]),
        )
        self.register_outputs({})
