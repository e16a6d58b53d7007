"""GKE's managed DRANET for GPUDirect-RDMA pools: the ResourceClaimTemplate Pods claim their RDMA NICs
through, and the Pod pieces that claim it instead of the multi-network annotations.

Sources:

* GKE, "Allocate network resources by using GKE managed DRANET"
  (https://docs.cloud.google.com/kubernetes-engine/docs/how-to/allocate-network-resources-dra): a
  `networking-dra-driver` DaemonSet on GPU and TPU nodes with DRANET enabled; from GKE
  1.34.1-gke.1829001, GKE installs the DeviceClasses `mrdma.google.com` (RDMA) and
  `netdev.google.com` (other NICs) itself.
* GoogleCloudPlatform/cluster-toolkit v1.95.0 (1047080375af, 2026-06-25),
  modules/compute/gke-node-pool: `resource-claim-template.yaml.tftpl` (a `resource.k8s.io/v1`
  ResourceClaimTemplate `default-rdma`, one request `req-mrdma` of `exactly` the DeviceClass,
  allocation mode `All` by default, variables.tf), main.tf (the node pool's
  `accelerator_network_profile = "auto"` and the node label
  `cloud.google.com/gke-networking-dra-driver=true`, Dataplane V2 required), gpu_direct.tf
  (`dranet_min_version`).
* GoogleCloudPlatform/container-engine-accelerators@992db812 gpudirect-rdma/nccl-test-managed-rdma.yaml:
  a Pod on managed RDMA names the claim in `spec.resourceClaims` and in its container's
  `resources.claims`, mounts gIB's host directories and sources `set_nccl_env.sh`, and carries no
  `networking.gke.io` annotation (Google's test claims `ExactCount` 8; this program claims `All`
  as cluster-toolkit does, so one template serves 8-NIC A3 Ultra/A4 and 4-NIC A4X nodes alike).
"""

from typing import Annotated, Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import K8sName
from ..core.common import Problem
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels
from ..core.validation import ArgsModel
from .flavors import (
    DRANET_CLAIM_TEMPLATE,
    DRANET_DEVICE_CLASS,
    DRANET_REQUEST,
    counted_claim_template_spec,
)

MAX_NAMESPACES = 64


def claim_template_spec() -> dict[str, Any]:
    """The ResourceClaimTemplate's `spec`: every MRDMA NIC of the node the Pod lands on."""
    return {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": DRANET_REQUEST,
                        "exactly": {"deviceClassName": DRANET_DEVICE_CLASS, "allocationMode": "All"},
                    }
                ]
            }
        }
    }


def _claim_template_args() -> "k8s.resource.v1.ResourceClaimTemplateSpecArgs":
    """`claim_template_spec()` as the provider's typed args."""
    ((request,),) = (claim_template_spec()["spec"]["devices"]["requests"],)
    return k8s.resource.v1.ResourceClaimTemplateSpecArgs(
        spec=k8s.resource.v1.ResourceClaimSpecArgs(
            devices=k8s.resource.v1.DeviceClaimArgs(
                requests=[
                    k8s.resource.v1.DeviceRequestArgs(
                        name=request["name"],
                        exactly=k8s.resource.v1.ExactDeviceRequestArgs(
                            device_class_name=request["exactly"]["deviceClassName"],
                            allocation_mode=request["exactly"]["allocationMode"],
                        ),
                    )
                ]
            )
        )
    )


class DranetClaimTemplatesArgs(TypedDict):
    """Where the Pods that claim DRANET's RDMA NICs run."""

    namespaces: list[str]
    """The namespaces (existing, or declared before this component) whose Pods claim the NICs: each
    gets the ResourceClaimTemplate `default-rdma`."""
    nic_counts: NotRequired[list[int]]
    """NIC counts n for which each namespace also gets the template `rdma-<n>` (ExactCount n): the one
    a job queued by Kueue claims, since Kueue admits no claim of `default-rdma` (allocation mode All).
    The stack gives its DRANET pools' NIC counts (8 on A3 Ultra, A4 and A4X Max, 4 on A4X)."""


class _Spec(ArgsModel):
    namespaces: Annotated[list[K8sName], Field(min_length=1, max_length=MAX_NAMESPACES)]
    nic_counts: Annotated[list[Annotated[int, Field(ge=1, le=16)]], Field(default_factory=list, max_length=4)]


def _rules(spec: _Spec) -> list[str]:
    seen: set[str] = set()
    problems: list[str] = []
    for i, namespace in enumerate(spec.namespaces):
        if namespace in seen:
            problems.append(Problem(f"namespaces[{i}]", f"{namespace} is listed twice"))
        seen.add(namespace)
    for i, count in enumerate(spec.nic_counts):
        if spec.nic_counts.index(count) != i:
            problems.append(Problem(f"nic_counts[{i}]", f"{count} is listed twice"))
    return problems


class DranetClaimTemplates(GkeGpuComponent[_Spec]):
    """The ResourceClaimTemplate `default-rdma` (`resource.k8s.io/v1`) in each namespace whose Pods
    run on DRANET pools: one request of every device of the DeviceClass `mrdma.google.com` (allocation
    mode `All`), which GKE installs on clusters at 1.34.1-gke.1829001 or later. A Pod names it in
    `spec.resourceClaims` and its container in `resources.claims` (`dranet_pod_parts`); each Pod then
    gets a ResourceClaim of its own, made from the template, for the node it is scheduled on."""

    template_names: pulumi.Output[list[str]]
    """`<namespace>/default-rdma` and `<namespace>/rdma-<n>` per namespace."""

    _args_model = _Spec
    _args_rules = staticmethod(_rules)
    _args_type = DranetClaimTemplatesArgs

    def __init__(
        self,
        name: str,
        /,
        args: DranetClaimTemplatesArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        labels = app_labels("gpudirect-dranet", component="network")
        for namespace in spec.namespaces:
            k8s.resource.v1.ResourceClaimTemplate(
                f"{name}-{namespace}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=DRANET_CLAIM_TEMPLATE, namespace=namespace, labels=labels
                ),
                spec=_claim_template_args(),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for count in spec.nic_counts:
                k8s.resource.v1.ResourceClaimTemplate(
                    f"{name}-{namespace}-rdma-{count}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=f"rdma-{count}", namespace=namespace, labels=labels
                    ),
                    spec=cast(Any, counted_claim_template_spec(count)),
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.template_names = pulumi.Output.from_input(
            [
                f"{namespace}/{template}"
                for namespace in spec.namespaces
                for template in (DRANET_CLAIM_TEMPLATE, *(f"rdma-{n}" for n in spec.nic_counts))
            ]
        )
        self.register_outputs({"templateNames": self.template_names})
