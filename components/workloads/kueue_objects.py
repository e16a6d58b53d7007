"""The Kueue objects of one GPU pool's queue: its ResourceFlavor and ClusterQueues (v1beta2, checked
against the CRDs vendored from the pinned Kueue in tests/schemas/crds/)."""

from collections.abc import Mapping
from typing import Protocol

from ..core.common import GPU_RESOURCE
from ..core.k8s import TolerationSpec, toleration_args
from .batch_teams import TOPOLOGY_NAME, Quota, queue_name
from .kueue_config import DraQuotaResource

# The label Kubernetes puts on every namespace: its name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# What a queue's quota covers: Kueue admits only Pods whose every request is covered.
COVERED_RESOURCES = ("cpu", "memory", "ephemeral-storage", GPU_RESOURCE)


class QueueObjects(Protocol):
    """What the objects read of a checked queue."""

    @property
    def name(self) -> str: ...
    @property
    def node_labels(self) -> dict[str, str]: ...
    @property
    def tolerations(self) -> list[TolerationSpec]: ...
    @property
    def topology(self) -> bool: ...


def flavor(queue: "QueueObjects") -> dict[str, object]:
    flavor: dict[str, object] = {"nodeLabels": dict(queue.node_labels)}
    if queue.tolerations:
        flavor["tolerations"] = [toleration_args(t) for t in queue.tolerations]
    if queue.topology:
        flavor["topologyName"] = TOPOLOGY_NAME
    return flavor


def cluster_queue(
    queue: "QueueObjects",
    quota: Quota,
    *,
    admission: dict[str, object] | None,
    in_cohort: bool,
    namespaces: list[str] | None = None,
    borrowing_limit: Quota | None = None,
    per_gpu: Mapping[DraQuotaResource, int] | None = None,
) -> dict[str, object]:
    """A ClusterQueue of the pool's flavor with `quota`. In the pool's cohort it may borrow idle quota
    (up to `borrowing_limit`) and reclaims its own by preempting borrowers; a team's admits only its
    namespace. `per_gpu` (DRA claims Kueue counts, kueue_config.py's DRA_QUOTA_CLASSES) it also covers,
    at that many for each GPU of the quota (every Pod that claims them takes GPUs too)."""
    nominal = quota.as_resources()
    limits = borrowing_limit.as_resources() if borrowing_limit else {}
    covered: tuple[str, ...] = (*COVERED_RESOURCES, *sorted(per_gpu or {}))
    for resource, count in (per_gpu or {}).items():
        nominal[resource] = quota.gpus * count
        if borrowing_limit:
            limits[resource] = borrowing_limit.gpus * count
    resources = []
    for name in covered:
        entry: dict[str, object] = {"name": name, "nominalQuota": nominal[name]}
        if name in limits:
            entry["borrowingLimit"] = limits[name]
        resources.append(entry)
    cluster_queue: dict[str, object] = {
        "resourceGroups": [
            {
                "coveredResources": list(covered),
                "flavors": [{"name": queue_name(queue.name), "resources": resources}],
            }
        ],
    }
    # None: any namespace may point a LocalQueue at the queue; a list: only those (none at all when
    # empty: Kueue reads a missing selector as no namespace).
    if namespaces is None:
        cluster_queue["namespaceSelector"] = {}
    elif namespaces:
        cluster_queue["namespaceSelector"] = {
            "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(namespaces)}]
        }
    if in_cohort:
        cluster_queue["cohortName"] = queue_name(queue.name)
        cluster_queue["preemption"] = {
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "LowerPriority",
        }
    if admission is not None:
        # v1beta2 has admissionChecksStrategy only (spec.admissionChecks is v1beta1's).
        cluster_queue["admissionChecksStrategy"] = admission
    return cluster_queue
