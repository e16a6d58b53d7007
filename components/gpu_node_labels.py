"""Labels and taints on named GPU nodes, owned by this stack through server-side apply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from .config import GPU_TAINT_KEY, GPU_TAINT_VALUE
from .package import component_options, component_type


@dataclass(frozen=True, kw_only=True)
class GpuNodeLabelsArgs:
    nodes: Sequence[str]
    label_key: str
    label_value: str
    taint: bool = True


class GpuNodeLabels(pulumi.ComponentResource):
    """One NodePatch per GPU node: the label the device plugin selects, and the GPU taint.

    A patch is a server-side apply of exactly what the program owns: the node's name (which node),
    the one label and, unless `taint` is off, `spec.taints` with the GPU taint; no annotation, no
    other field. Each patch applies under its own field manager, `pulumi-kubernetes-<random>`, that
    the provider generates once and keeps in the stack's state, so two stacks, or a renamed patch
    beside the old one, never give up each other's fields. (Stacks created while the patches still
    carried a `pulumi.com/patchFieldManager` annotation keep the manager it named: the provider takes
    it from the state, and the next apply removes the annotation from the node.) Removing a node from
    the list deletes its patch, which gives its fields up, so the label goes away again; other labels
    are never touched.

    Hazard: a node's taints are one atomic list in the Kubernetes API. If another manager (kubectl
    taint, kubeadm) already set taints on the node, the apply stops with a field conflict instead of
    replacing them; resolve it by hand (or set `taintGpuNodes: false`) rather than forcing. And once
    another manager rewrites the list (the node controller adding a not-ready taint, say), it owns
    the whole list: deleting the patch then leaves the GPU taint, which `kubectl taint nodes NODE
    nvidia.com/gpu-` removes.
    """

    def __init__(
        self, name: str, args: GpuNodeLabelsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            component_type("GpuNodeLabels"), name, None, component_options("GpuNodeLabels", opts)
        )
        self.patches: dict[str, k8s.core.v1.NodePatch] = {}
        for node in args.nodes:
            spec = None
            if args.taint:
                spec = k8s.core.v1.NodeSpecPatchArgs(
                    taints=[
                        k8s.core.v1.TaintPatchArgs(
                            key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect="NoSchedule"
                        )
                    ]
                )
            self.patches[node] = k8s.core.v1.NodePatch(
                f"{name}-{node}",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=node, labels={args.label_key: args.label_value}
                ),
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"nodes": list(args.nodes)})
