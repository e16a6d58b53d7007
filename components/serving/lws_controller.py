"""LeaderWorkerSetController: the LeaderWorkerSet controller (kubernetes-sigs/lws), so that a model
server whose replica spans nodes can run as a LeaderWorkerSet."""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels, pod_security_labels
from ..core.validation import ArgsModel

# Upstream's Helm chart, pinned (docs/serving-research.md 8): its CRDs, the controller and its
# webhooks. Offline the chart cannot be expanded; the LeaderWorkerSets declared here are checked
# against the CRD vendored from the same release (tests/schemas/crds/).
LWS_CHART = "oci://registry.k8s.io/lws/charts/lws"
LWS_VERSION = "0.10.0"
# The release's image: the chart's packaging sets it to this (lws hack/push-chart.sh); pinned here too.
LWS_IMAGE, LWS_IMAGE_TAG = "registry.k8s.io/lws/lws", "v0.10.0"
# The chart's CRD points its conversion webhook at a Service in lws-system: the namespace is fixed.
LWS_NAMESPACE = "lws-system"


class LeaderWorkerSetControllerArgs(TypedDict):
    """The controller's size (request and limit)."""

    cpu: NotRequired[float]
    """CPU of the controller, in cores. Defaults to 1 (the chart's request)."""
    memory_gib: NotRequired[int]
    """Memory of the controller, in GiB; it caches the cluster's LeaderWorkerSets and their Pods.
    Defaults to 1 (the chart's request)."""


class _ControllerSpec(ArgsModel):
    cpu: float = Field(1, gt=0, le=64)
    memory_gib: int = Field(1, ge=1, le=256)


class LeaderWorkerSetController(GkeGpuComponent[_ControllerSpec]):
    """The LeaderWorkerSet controller from its upstream Helm chart (pinned), in `lws-system`: the
    `leaderworkerset.x-k8s.io/v1` CRD, the controller and its webhooks (which it serves with
    certificates of its own). Hardened beyond the chart's defaults: seccomp RuntimeDefault, the
    namespace enforcing Pod Security `restricted`, and a CPU and memory limit equal to the request.
    One per cluster: the CRD and the webhooks are cluster-wide. Declare LeaderWorkerSets after it
    (depends_on): its webhooks default and check them."""

    _args_model = _ControllerSpec
    _args_type = LeaderWorkerSetControllerArgs

    def __init__(
        self,
        name: str,
        /,
        args: LeaderWorkerSetControllerArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        labels = app_labels("lws", component="leader-worker-set", version=LWS_VERSION)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=LWS_NAMESPACE,
                labels={
                    **labels,
                    # The controller's Pod passes 'restricted' with the values below.
                    **pod_security_labels("restricted", "restricted"),
                },
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        size = {"cpu": f"{spec.cpu:g}", "memory": f"{spec.memory_gib}Gi"}
        k8s.helm.v4.Chart(
            f"{name}-chart",
            chart=LWS_CHART,
            version=LWS_VERSION,
            namespace=LWS_NAMESPACE,
            # The chart's values (charts/lws/values.yaml at v0.10.0); maps merge with its defaults.
            values={
                "image": {
                    "manager": {"repository": LWS_IMAGE, "tag": LWS_IMAGE_TAG, "pullPolicy": "IfNotPresent"}
                },
                "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "resources": {"requests": size, "limits": size},
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
        )
        self.register_outputs({})
