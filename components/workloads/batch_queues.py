"""Kueue and JobSet, and a queue per GPU pool: gang admission for multi-node GPU jobs."""

from typing import Annotated, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field, model_validator

from ..core.arg_types import K8sName, LabelKey
from ..core.common import Problems
from ..core.component import GkeGpuComponent
from ..core.k8s import Toleration, TolerationSpec, app_labels, toleration_args, toleration_problems
from ..core.validation import ArgsModel

# Pinned upstream charts (../shared/reference/gke-gpu-scale-out.md, section 4): the real deploy
# installs upstream's own manifests, CRDs included. Offline the charts cannot be expanded; the
# objects declared here are checked against the CRDs vendored from the same versions
# (tests/schemas/crds/).
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_VERSION = "0.19.2"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_VERSION = "0.12.0"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
# What a queue's quota covers: Kueue admits only Pods whose every request is covered.
COVERED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "nvidia.com/gpu")
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"


class BatchQueue(TypedDict):
    """One GPU pool's queue: a ResourceFlavor (where its Pods go) and a ClusterQueue (how much)."""

    name: str
    """The pool's name; the flavor, ClusterQueue and LocalQueue are `gpu-<name>`."""
    node_labels: dict[str, str]
    """The labels of the pool's nodes (the flavor puts them on admitted Pods as node selectors)."""
    tolerations: list[Toleration]
    """Tolerations for the pool's taints (the flavor adds them to admitted Pods)."""
    gpus: int
    """`nvidia.com/gpu` quota: the pool's nodes at most x what each node advertises."""
    cpus: int
    """CPU quota, in cores (the pool's nodes at most x their vCPUs)."""
    memory_gib: int
    """Memory quota, in GiB (the pool's nodes at most x their memory)."""
    ephemeral_storage_gib: int
    """Ephemeral-storage quota, in GiB (the pool's nodes at most x their boot disk)."""
    queued_provisioning: NotRequired[bool]
    """The pool takes nodes only through ProvisioningRequests: the queue gets a
    ProvisioningRequestConfig and an AdmissionCheck. Defaults to false."""


class GpuBatchQueuesArgs(TypedDict):
    queues: list[BatchQueue]
    """A queue per GPU pool (at least one)."""
    local_queue_namespace: NotRequired[str]
    """A namespace (that exists) for a LocalQueue per ClusterQueue, e.g. the samples'. Defaults to
    none."""


class _QueueSpec(ArgsModel):
    name: K8sName
    node_labels: dict[LabelKey, Annotated[str, Field(max_length=63)]]
    tolerations: list[TolerationSpec]
    gpus: int = Field(ge=1, le=100_000)
    cpus: int = Field(ge=1, le=10_000_000)
    memory_gib: int = Field(ge=1, le=100_000_000)
    ephemeral_storage_gib: int = Field(ge=1, le=100_000_000)
    queued_provisioning: bool = False


class _GpuBatchQueuesSpec(ArgsModel):
    queues: Annotated[list[_QueueSpec], Field(min_length=1, max_length=100)]
    local_queue_namespace: K8sName | None = None

    @model_validator(mode="after")
    def _unique_names(self) -> "_GpuBatchQueuesSpec":
        names = [q.name for q in self.queues]
        if len(set(names)) != len(names):
            raise ValueError("queue names must be unique")
        return self


def _queue_rules(spec: _GpuBatchQueuesSpec) -> list[str]:
    problems = Problems()
    for i, queue in enumerate(spec.queues):
        for j, toleration in enumerate(queue.tolerations):
            for problem in toleration_problems(f"queues[{i}].tolerations[{j}]", toleration):
                path, _, message = problem.partition(": ")
                problems.add(path, message)
    return problems.items


def queue_name(pool: str) -> str:
    """The ResourceFlavor, ClusterQueue and LocalQueue of a pool."""
    return f"gpu-{pool}"


class GpuBatchQueues(GkeGpuComponent[_GpuBatchQueuesSpec]):
    """Kueue and JobSet from their upstream Helm charts, and per GPU pool a ResourceFlavor (the pool's
    node labels and tolerations) and a ClusterQueue whose quota is what the pool can hold at most:
    GPUs, CPU, memory and ephemeral storage (Kueue admits only Pods whose every request is covered).
    A pool with queued provisioning gets a ProvisioningRequestConfig and an AdmissionCheck on its
    ClusterQueue, so Kueue asks GKE for the nodes before it admits a job (all of them at once).

    Jobs and JobSets are queued by the label `kueue.x-k8s.io/queue-name: <LocalQueue>`; Kueue admits a
    JobSet only when the whole of it fits the quota (and, for a queued pool, once GKE has provisioned
    all its nodes). The quota is node capacity, not allocatable, and Kueue's waitForPodsReady is off
    (the chart's default): an admitted job can still wait for room on its nodes."""

    cluster_queue_names: pulumi.Output[list[str]]
    """The ClusterQueues, one per pool: `gpu-<pool>`."""
    local_queue_names: pulumi.Output[list[str]]
    """The LocalQueues in `local_queue_namespace` (none without it)."""

    _args_model = _GpuBatchQueuesSpec
    _args_rules = staticmethod(_queue_rules)

    def __init__(
        self, name: str, args: GpuBatchQueuesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        charts = [
            self._chart(name, "kueue", KUEUE_CHART, KUEUE_VERSION, "kueue-system"),
            self._chart(name, "jobset", JOBSET_CHART, JOBSET_VERSION, "jobset-system"),
        ]
        # The objects need the charts' CRDs and Kueue's webhook.
        after_charts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=charts))
        cluster_queues: list[str] = []
        local_queues: list[str] = []
        for queue in spec.queues:
            queue_id = queue_name(queue.name)
            prefix = f"{name}-{queue.name}"

            def after(*resources: pulumi.Resource) -> pulumi.ResourceOptions:
                # Kueue's order on create (and its reverse on delete): a ClusterQueue after its flavor
                # and admission check, a LocalQueue after its ClusterQueue.
                return pulumi.ResourceOptions.merge(
                    after_charts, pulumi.ResourceOptions(depends_on=list(resources))
                )

            needed = [
                self._object(f"{prefix}-flavor", "ResourceFlavor", queue_id, _flavor(queue), after_charts)
            ]
            cluster_queue = _cluster_queue(queue)
            if queue.queued_provisioning:
                check = f"dws-{queue.name}"
                config = self._object(
                    f"{prefix}-provisioning",
                    "ProvisioningRequestConfig",
                    check,
                    {
                        "provisioningClassName": QUEUED_PROVISIONING_CLASS,
                        "managedResources": ["nvidia.com/gpu"],
                        # Pin each admitted Pod to the nodes provisioned for its own request.
                        "podSetUpdates": {
                            "nodeSelector": [
                                {
                                    "key": "autoscaling.gke.io/provisioning-request",
                                    "valueFromProvisioningClassDetail": "ResizeRequestName",
                                }
                            ]
                        },
                    },
                    after_charts,
                )
                admission: dict[str, object] = {
                    "controllerName": "kueue.x-k8s.io/provisioning-request",
                    "parameters": {
                        "apiGroup": "kueue.x-k8s.io",
                        "kind": "ProvisioningRequestConfig",
                        "name": check,
                    },
                }
                needed.append(
                    self._object(
                        f"{prefix}-admission-check", "AdmissionCheck", check, admission, after(config)
                    )
                )
                # v1beta2 has admissionChecksStrategy only (spec.admissionChecks is v1beta1's).
                cluster_queue["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
            queue_object = self._object(
                f"{prefix}-cluster-queue", "ClusterQueue", queue_id, cluster_queue, after(*needed)
            )
            cluster_queues.append(queue_id)
            if spec.local_queue_namespace:
                self._object(
                    f"{prefix}-local-queue",
                    "LocalQueue",
                    queue_id,
                    {"clusterQueue": queue_id},
                    after(queue_object),
                    namespace=spec.local_queue_namespace,
                )
                local_queues.append(queue_id)
        self.cluster_queue_names = pulumi.Output.from_input(cluster_queues)
        self.local_queue_names = pulumi.Output.from_input(local_queues)
        self.register_outputs(
            {"clusterQueueNames": self.cluster_queue_names, "localQueueNames": self.local_queue_names}
        )

    def _chart(self, name: str, app: str, chart: str, version: str, namespace: str) -> "k8s.helm.v4.Chart":
        ns = k8s.core.v1.Namespace(
            f"{name}-{app}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=namespace, labels=app_labels(app, component="batch", version=version)
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return k8s.helm.v4.Chart(
            f"{name}-{app}",
            chart=chart,
            version=version,
            namespace=namespace,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]),
        )

    def _object(
        self,
        resource_name: str,
        kind: str,
        object_name: str,
        spec: dict[str, object],
        opts: pulumi.ResourceOptions,
        *,
        namespace: str | None = None,
    ) -> "k8s.apiextensions.CustomResource":
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=KUEUE_API,
            kind=kind,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=object_name,
                namespace=namespace,
                labels=app_labels(object_name, component=kind.lower()),
            ),
            spec=spec,
            opts=opts,
        )


def _flavor(queue: _QueueSpec) -> dict[str, object]:
    flavor: dict[str, object] = {"nodeLabels": dict(queue.node_labels)}
    if queue.tolerations:
        flavor["tolerations"] = [toleration_args(t) for t in queue.tolerations]
    return flavor


def _cluster_queue(queue: _QueueSpec) -> dict[str, object]:
    quota = {
        "cpu": queue.cpus,
        "memory": f"{queue.memory_gib}Gi",
        "ephemeral-storage": f"{queue.ephemeral_storage_gib}Gi",
        "nvidia.com/gpu": queue.gpus,
    }
    return {
        "namespaceSelector": {},  # any namespace may point a LocalQueue at it
        "resourceGroups": [
            {
                "coveredResources": list(COVERED_RESOURCES),
                "flavors": [
                    {
                        "name": queue_name(queue.name),
                        "resources": [{"name": r, "nominalQuota": quota[r]} for r in COVERED_RESOURCES],
                    }
                ],
            }
        ],
    }
