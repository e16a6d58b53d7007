"""A Kubernetes cluster this program does not manage: only a provider for the GPU layer."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from .package import component_options, component_type


@dataclass(frozen=True, kw_only=True)
class ExistingClusterArgs:
    # The kubeconfig, from a Pulumi secret; it stays a secret output.
    kubeconfig: pulumi.Input[str]
    # A context of the kubeconfig; None means its current-context.
    context: str | None = None


class ExistingCluster(pulumi.ComponentResource):
    """The Kubernetes provider for a cluster someone else owns (kubeadm, Charmed Kubernetes, a GKE
    cluster of another team). Nothing in GCP is declared; deleting the stack leaves the cluster.
    """

    provider: k8s.Provider

    def __init__(
        self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            component_type("ExistingCluster"), name, None, component_options("ExistingCluster", opts)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.secret(args.kubeconfig),
            context=args.context,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"context": args.context})
