"""An Autopilot GPU profile that prefers Spot and falls back to on-demand: a GKE ComputeClass."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config import GpuPool
from components.gpu_scheduling import compute_class_name
from components.k8s_common import app_labels

COMPUTE_CLASS_API_VERSION = "cloud.google.com/v1"


@dataclass(frozen=True, kw_only=True)
class GpuComputeClassArgs:
    pool: GpuPool


class GpuComputeClass(pulumi.ComponentResource):
    """A ComputeClass whose priorities are the profile's GPU on Spot, then the same GPU on-demand.

    Workloads select it with the node selector ``cloud.google.com/compute-class: gpu-<profile>``
    and request ``nvidia.com/gpu``; GKE creates a Spot node when it can and an on-demand one when
    Spot capacity is out. ``whenUnsatisfiable: DoNotScaleUp`` keeps GPU Pods pending rather than
    landing them on a node without the GPU. Needs GKE 1.30.3-gke.1451000 or later.
    """

    compute_class: k8s.apiextensions.CustomResource
    class_name: str

    def __init__(
        self, name: str, args: GpuComputeClassArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gke-gpu:gpu:GpuComputeClass", name, None, opts)
        pool = args.pool
        self.class_name = compute_class_name(pool)
        gpu = {
            "type": pool.accelerator,
            "count": pool.gpus_per_node,
            "driverVersion": pool.driver_version.lower(),
        }
        self.compute_class = k8s.apiextensions.CustomResource(
            f"{name}-class",
            api_version=COMPUTE_CLASS_API_VERSION,
            kind="ComputeClass",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=self.class_name,
                labels=app_labels(self.class_name, component="gpu-compute-class"),
            ),
            spec={
                "priorities": [{"gpu": gpu, "spot": True}, {"gpu": gpu, "spot": False}],
                "nodePoolAutoCreation": {"enabled": True},
                "whenUnsatisfiable": "DoNotScaleUp",
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"className": self.class_name})
