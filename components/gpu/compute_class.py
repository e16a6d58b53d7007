"""An Autopilot GPU profile that prefers Spot and falls back to on-demand: a GKE ComputeClass."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import RegionName
from ..core.catalog import load_catalog
from ..core.component import NO_ARGS, CheckedArgs, GkeGpuComponent
from ..core.k8s import COMPUTE_CLASS_API_VERSION, app_labels
from .pool import GpuPool
from .pool_args import GpuComputeClassArgs
from .rule_base import PoolPlace
from .rules import GpuPoolRules, validate_pool_args
from .scheduling import compute_class_name

__all__ = [
    "GPU_SHARING_MIN_VERSION",
    "GpuComputeClass",
    "GpuComputeClassArgs",
    "compute_class_args",
    "gpu_sharing",
    "validate_compute_class_args",
]

# GKE version that first accepts `priorities[].gpu.gpuSharing`. UNVERIFIED: taken from secondary
# sources (kcl-lang/modules PR #358, which cites GKE's ComputeClass CRD reference), not from a
# Google page; the CRD schema itself (datreeio/CRDs-catalog) carries no version.
GPU_SHARING_MIN_VERSION = "1.35.2-gke.1485000"


class GpuComputeClassSpec(GpuPool):
    """GpuComputeClass's args as checked: an Autopilot GPU profile (the stack file's pool model, read
    with snake_case names) that prefers Spot and falls back to on-demand."""

    gpus_per_node: int = Field(ge=1, le=16)
    region: RegionName | None = None


def check_compute_class(spec: GpuComputeClassSpec) -> tuple[GpuPool | None, list[str], list[str]]:
    """The Autopilot catalog rules for the profile: (the resolved profile or None, problems, notes)."""
    catalog = load_catalog()
    region = spec.region
    known = region in catalog.gcp_regions if region else False
    rules = GpuPoolRules(catalog, PoolPlace(region, known, region), autopilot=True, camel_keys=False)
    if region and region not in catalog.gcp_regions:
        rules.problems.add("region", f"{region!r} is not a Compute Engine region")
    profile = spec.model_copy(update={"spot": True, "on_demand_fallback": True})
    resolved = rules.check(profile)
    return (None if rules.problems.items else resolved), rules.problems.items, rules.warnings


def validate_compute_class_args(name: str, args: GpuComputeClassArgs) -> tuple[GpuPool, list[str]]:
    """GpuComputeClass's boundary check: the resolved profile and its notes; raises InvalidArgsError
    naming every bad arg."""
    return validate_pool_args(
        "GpuComputeClass", name, GpuComputeClassSpec, args, check_compute_class, GpuComputeClassArgs
    )


def compute_class_args(pool: GpuPool, *, region: str | None) -> GpuComputeClassArgs:
    """GpuComputeClass's args for an Autopilot profile of a stack file, checked and resolved by the
    stack's run of the same pool rules."""
    args: dict[str, Any] = {
        "name": pool.name,
        "accelerator": pool.accelerator,
        "gpus_per_node": pool.gpus_per_node,
        "driver_version": pool.driver_version,
    }
    if region:
        args["region"] = region
    if pool.sharing:
        args["sharing"] = pool.sharing.model_dump()
    if pool.mig_partition_size:
        args["mig_partition_size"] = pool.mig_partition_size
    # The profile was checked and resolved by the pool rules on the stack file's entry: the component
    # does not run them again (CheckedArgs).
    spec = pool.as_spec(GpuComputeClassSpec, **({"region": region} if region else {}))
    return CheckedArgs(args, spec)  # type: ignore[return-value]


def gpu_sharing(pool: GpuPool) -> dict[str, Any] | None:
    """The profile's GPU sharing and MIG partition as the CRD's `gpu.gpuSharing`, None without either."""
    sharing: dict[str, Any] = {}
    if pool.sharing:
        sharing["sharingStrategy"] = pool.sharing.strategy
        sharing["maxSharedClientsPerGPU"] = pool.sharing.max_clients_per_gpu
    if pool.mig_partition_size:
        sharing["gpuPartitionSize"] = pool.mig_partition_size
    return sharing or None


class GpuComputeClass(GkeGpuComponent[GpuPool]):
    """A ComputeClass whose priorities are the profile's GPU on Spot, then the same GPU on-demand.

    Workloads select it with the node selector ``cloud.google.com/compute-class: gpu-<profile>``
    and request ``nvidia.com/gpu``; GKE creates a Spot node when it can and an on-demand one when
    Spot capacity is out. ``whenUnsatisfiable: DoNotScaleUp`` keeps GPU Pods pending rather than
    landing them on a node without the GPU. Needs GKE 1.30.3-gke.1451000 or later.

    A profile with time-sharing (``sharing``) or a MIG partition (``migPartitionSize``) carries
    them as ``gpu.gpuSharing`` in both priorities, so the on-demand node is shared or partitioned
    like the Spot one; its Pods request one ``nvidia.com/gpu`` (one share or one partition).
    ``gpuSharing`` needs a newer GKE: 1.35.2-gke.1485000 or later according to secondary sources;
    that version is UNVERIFIED against Google's own documentation (see GPU_SHARING_MIN_VERSION).
    """

    class_name: pulumi.Output[str]
    """The ComputeClass's name, `gpu-<name>`: Pods select it with the node selector
    `cloud.google.com/compute-class`."""

    @classmethod
    def _check(cls, name: str, args: Any) -> tuple[GpuPool, list[str]]:
        """The pool with every default resolved, and the rules' notes."""
        return validate_compute_class_args(name, args)

    def __init__(
        self,
        name: str,
        /,
        args: GpuComputeClassArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        # Every problem is raised before anything is declared, the component itself included.
        args = self._given(name, args, kwargs)
        pool = self._begin(name, args, opts)
        class_name = compute_class_name(pool)
        self.class_name = pulumi.Output.from_input(class_name)
        gpu: dict[str, Any] = {
            "type": pool.accelerator,
            "count": pool.gpus_per_node,
            "driverVersion": pool.driver_version.lower(),
        }
        sharing = gpu_sharing(pool)
        if sharing:
            gpu["gpuSharing"] = sharing
        self.compute_class = k8s.apiextensions.CustomResource(
            f"{name}-class",
            api_version=COMPUTE_CLASS_API_VERSION,
            kind="ComputeClass",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=class_name,
                labels=app_labels(class_name, component="gpu-compute-class"),
            ),
            spec={
                "priorities": [{"gpu": gpu, "spot": True}, {"gpu": gpu, "spot": False}],
                "nodePoolAutoCreation": {"enabled": True},
                "whenUnsatisfiable": "DoNotScaleUp",
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"className": self.class_name})
