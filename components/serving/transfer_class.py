"""HyperdiskMlTransferClass: the ComputeClass on whose nodes the GKE Volume Populator runs its transfer
Jobs into Hyperdisk ML volumes (InferenceService's `weights.via hyperdiskMl`)."""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import COMPUTE_CLASS_API_VERSION, app_labels
from ..core.validation import ArgsModel, Deferrable
from .hyperdisk_ml import TRANSFER_CLASS

# The machine families of GKE's how-to (both attach Hyperdisk ML: rules.HYPERDISK_ML_SERIES).
TRANSFER_FAMILIES = ("c3", "c3d")


class HyperdiskMlTransferClassArgs(TypedDict):
    """Whose nodes the transfer runs on."""

    node_service_account_email: NotRequired[pulumi.Input[str]]
    """A Standard cluster: the service account of the nodes GKE creates for the transfer
    (GkeCluster's `node_service_account_email`). Leave it out on Autopilot (its node pools use the
    cluster's own). Defaults to none: GKE's default, the Compute Engine default account on Standard."""


class _TransferClassSpec(ArgsModel):
    node_service_account_email: Deferrable[Annotated[str, Field(max_length=254)]] | None = None


class HyperdiskMlTransferClass(GkeGpuComponent[_TransferClassSpec]):
    """The custom ComputeClass `gcs-to-hdml-compute-class` (cloud.google.com/v1), the name GKE's Volume
    Populator gives its transfer Jobs into Hyperdisk ML: C3, then C3D machines, in node pools GKE
    creates when a transfer waits for a node and removes when idle (`nodePoolAutoCreation`);
    `whenUnsatisfiable: DoNotScaleUp` keeps a transfer pending rather than on another machine. A
    transfer asks for 24 vCPUs unless its claim says otherwise (GKE's how-to). One per cluster: the
    name is fixed. Needs GKE 1.33.2-gke.4780000 (the populator) and, on a Standard cluster without
    node auto-provisioning, 1.33.3-gke.1136000 (node pools for a ComputeClass)."""

    class_name: pulumi.Output[str]
    """The ComputeClass's name, `gcs-to-hdml-compute-class`."""

    _args_model = _TransferClassSpec
    _args_type = HyperdiskMlTransferClassArgs

    def __init__(
        self,
        name: str,
        /,
        args: HyperdiskMlTransferClassArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        class_spec: dict[str, Any] = {
            "priorities": [{"machineFamily": family} for family in TRANSFER_FAMILIES],
            "nodePoolAutoCreation": {"enabled": True},
            "whenUnsatisfiable": "DoNotScaleUp",
        }
        account = spec.node_service_account_email
        if account is not None:
            class_spec["nodePoolConfig"] = {"serviceAccount": account}
        k8s.apiextensions.CustomResource(
            f"{name}-class",
            api_version=COMPUTE_CLASS_API_VERSION,
            kind="ComputeClass",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=TRANSFER_CLASS, labels=app_labels(TRANSFER_CLASS, component="weights-transfer")
            ),
            spec=class_spec,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.class_name = pulumi.Output.from_input(TRANSFER_CLASS)
        self.register_outputs({"className": self.class_name})
