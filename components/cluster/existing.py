"""A Kubernetes cluster this program does not manage: only a provider for the GPU layer."""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.model import PRINTABLE
from ..core.validation import ArgsModel, Deferrable


class ExistingClusterArgs(TypedDict):
    """How to reach a cluster someone else owns."""

    kubeconfig: pulumi.Input[str]
    """The kubeconfig, from a Pulumi secret; it stays a secret output."""
    context: NotRequired[str]
    """A context of the kubeconfig. Defaults to its current-context."""


class _ExistingClusterSpec(ArgsModel):
    kubeconfig: Deferrable[Annotated[str, Field(min_length=1, max_length=1_000_000)]]
    context: Annotated[str, Field(min_length=1, max_length=253, pattern=PRINTABLE)] | None = None


class ExistingCluster(GkeGpuComponent[_ExistingClusterSpec]):
    """The Kubernetes provider for a cluster someone else owns (kubeadm, Charmed Kubernetes, a GKE
    cluster of another team). Nothing in GCP is declared; deleting the stack leaves the cluster.
    """

    context: pulumi.Output[str] | None
    """The kubeconfig context the provider uses; none for the kubeconfig's current-context."""

    _args_model = _ExistingClusterSpec

    def __init__(
        self,
        name: str,
        /,
        args: ExistingClusterArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        # A resource, not an output: the Kubernetes layer's components take it as their provider.
        self.provider: k8s.Provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.secret(spec.kubeconfig),
            context=spec.context,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.context = None if spec.context is None else pulumi.Output.from_input(spec.context)
        self.register_outputs({"context": self.context})
