"""Labels and taints on named GPU nodes, owned by this stack through server-side apply."""

from collections import Counter
from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import LabelKey, LabelValue, NodeName
from ..core.common import GPU_TAINT_KEY, GPU_TAINT_VALUE, Problem
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.validation import ArgsModel

MAX_NODES = 5000  # the config's bound for gpuNodes (Kubernetes supports 5000 nodes per cluster)


class GpuNodeLabelsArgs(TypedDict):
    """The GPU nodes and the label that marks them."""

    nodes: list[str]
    """The names of the GPU nodes, each once."""
    label_key: str
    """The label key the device plugin selects, e.g. nvidia.com/gpu.present."""
    label_value: str
    """The label's value, e.g. true."""
    taint: NotRequired[bool]
    """Taint each node nvidia.com/gpu=present:NoSchedule. Defaults to true."""


class _GpuNodeLabelsSpec(ArgsModel):
    nodes: Annotated[list[NodeName], Field(max_length=MAX_NODES)]
    label_key: LabelKey
    label_value: LabelValue
    taint: bool = True


def _node_rules(spec: _GpuNodeLabelsSpec) -> list[str]:
    counts = Counter(spec.nodes)
    return [Problem("nodes", f"lists {node!r} {n} times") for node, n in sorted(counts.items()) if n > 1]


class GpuNodeLabels(GkeGpuComponent[_GpuNodeLabelsSpec]):
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

    nodes: pulumi.Output[list[str]]
    """The nodes labelled (and tainted)."""

    _args_model = _GpuNodeLabelsSpec
    _args_rules = staticmethod(_node_rules)

    def __init__(
        self,
        name: str,
        /,
        args: GpuNodeLabelsArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        self.patches: dict[str, k8s.core.v1.NodePatch] = {}
        for node in spec.nodes:
            taints = None
            if spec.taint:
                taints = k8s.core.v1.NodeSpecPatchArgs(
                    taints=[
                        k8s.core.v1.TaintPatchArgs(
                            key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect="NoSchedule"
                        )
                    ]
                )
            self.patches[node] = k8s.core.v1.NodePatch(
                f"{name}-{node}",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=node, labels={spec.label_key: spec.label_value}
                ),
                spec=taints,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.nodes = pulumi.Output.from_input(list(spec.nodes))
        self.register_outputs({"nodes": self.nodes})
