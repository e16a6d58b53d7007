"""Watching a MultiKueue fleet: dashboard charts per worker cluster, and the alert that fires when the
manager has not reached a worker for a sustained period. Built as data from the manager's cluster name
and the workers' names; the fleet wiring (the MultiKueue objects, kube-state-metrics) lives elsewhere.

Every series comes from kube-state-metrics v2.20.0 (kubernetes/kube-state-metrics@4ffeda2e) in each
cluster of the fleet, reporting the state of Kueue v0.19.2's objects (kubernetes-sigs/kueue@8eab6877)
through its custom resource state metrics (`docs/metrics/extend/customresourcestate-metrics.md`; a
`[key=value]` path element picks a list item, `pkg/customresourcestate/registry_factory.go:600-660`;
a quantity such as "8" is read as a number, :773-776), scraped by Managed Service for Prometheus, whose
target labels `project_id`, `location`, `cluster` (the GKE cluster that ran the scrape), `namespace`
(kube-state-metrics'), `job`, `instance` are forced over the metric's own (GoogleCloudPlatform/
prometheus-engine `pkg/operator/apis/monitoring/v1/pod_config.go`). kube-state-metrics reads the API
with its own account's short-lived token, so nothing stores a token for the scrape: Kueue's own
/metrics, which only a bearer token may read, is not scraped (docs/fleet-monitoring.md says what the
dashboard lost with it).

* each worker's ClusterQueues (`CLUSTER_QUEUE_STATE`, apis/kueue/v1beta2/clusterqueue_types.go:377-392):
  `kube_customresource_clusterqueue_pending_workloads{name}` (`status.pendingWorkloads`),
  `kube_customresource_clusterqueue_admitted_workloads{name}` (`status.admittedWorkloads`, admitted and
  not finished), `kube_customresource_clusterqueue_gpus_in_use{name, flavor}` (`status.flavorsUsage[]`,
  the `nvidia.com/gpu` total admitted workloads use);
* on the manager, where each Workload runs (`WORKLOAD_PLACEMENT_STATE`, workload_types.go:695-706):
  `kube_customresource_workload_placement{name, workload_namespace, worker}` (`status.clusterName`,
  the worker that admitted it; empty while none has);
* whether the manager reaches a worker: Kueue exports no metric of it. The MultiKueueCluster's `Active`
  condition says it (`pkg/controller/admissionchecks/multikueue/multikueuecluster.go`, `updateStatus`):
  `kube_customresource_multikueuecluster_condition{customresource_group, customresource_kind,
  customresource_version, name, type}`, 1 for "True" and 0 for "False" or "Unknown"
  (registry_factory.go `toFloat64`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..core.common import GPU_RESOURCE, K8S_NAME, Problems, cut
from .alert_rules import AlertRule
from .dashboard_serving import promql_widget

CONDITION_METRIC = "kube_customresource_multikueuecluster_condition"
PENDING_METRIC = "kube_customresource_clusterqueue_pending_workloads"
ADMITTED_METRIC = "kube_customresource_clusterqueue_admitted_workloads"
GPUS_METRIC = "kube_customresource_clusterqueue_gpus_in_use"
PLACEMENT_METRIC = "kube_customresource_workload_placement"
# The alert's sustained period. Kueue retries a lost worker with a backoff that grows to
# 2^6 x 5 s = 320 s between attempts (multikueuecluster.go `retryAfter`), so a blip heals within a
# few minutes; after `multiKueue.workerLostTimeout` (15 min by default, apis/config/v1beta2/
# defaults.go) the manager gives up on the workloads it placed there and requeues them elsewhere.
# 10 minutes outlasts two of the longest retries and leaves 5 minutes to act (a credential to
# renew, a control plane to reach) before the jobs lose their place.
UNREACHABLE_FOR_S = 600
MULTIKUEUE_CLUSTER_STATE: dict[str, Any] = {
    # kube-state-metrics' CustomResourceStateMetrics (docs/metrics/extend/customresourcestate-metrics.md
    # at v2.20.0): one gauge per condition of each MultiKueueCluster, its value the condition's status.
    "kind": "CustomResourceStateMetrics",
    "spec": {
        "resources": [
            {
                "groupVersionKind": {
                    "group": "kueue.x-k8s.io",
                    "version": "v1beta2",
                    "kind": "MultiKueueCluster",
                },
                "labelsFromPath": {"name": ["metadata", "name"]},
                "metrics": [
                    {
                        "name": "multikueuecluster_condition",
                        "help": "Each condition of a MultiKueueCluster: 1 True, 0 False or Unknown.",
                        "each": {
                            "type": "Gauge",
                            "gauge": {
                                "path": ["status", "conditions"],
                                "labelsFromPath": {"type": ["type"]},
                                "valueFrom": ["status"],
                            },
                        },
                    }
                ],
            }
        ]
    },
}


def _kueue_kind(kind: str) -> dict[str, str]:
    return {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": kind}


def _gauge(name: str, help_text: str, gauge: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "help": help_text, "each": {"type": "Gauge", "gauge": gauge}}


CLUSTER_QUEUE_STATE: dict[str, Any] = {
    "groupVersionKind": _kueue_kind("ClusterQueue"),
    "labelsFromPath": {"name": ["metadata", "name"]},
    "metrics": [
        _gauge(
            "clusterqueue_pending_workloads",
            "Workloads waiting in the ClusterQueue.",
            {"path": ["status", "pendingWorkloads"], "nilIsZero": True},
        ),
        _gauge(
            "clusterqueue_admitted_workloads",
            "Workloads admitted by the ClusterQueue and not finished.",
            {"path": ["status", "admittedWorkloads"], "nilIsZero": True},
        ),
        _gauge(
            "clusterqueue_gpus_in_use",
            f"{GPU_RESOURCE} the ClusterQueue's admitted workloads use, per flavor.",
            {
                "path": ["status", "flavorsUsage"],
                "labelsFromPath": {"flavor": ["name"]},
                "valueFrom": ["resources", f"[name={GPU_RESOURCE}]", "total"],
            },
        ),
    ],
}
WORKLOAD_PLACEMENT_STATE: dict[str, Any] = {
    "groupVersionKind": _kueue_kind("Workload"),
    "labelsFromPath": {"name": ["metadata", "name"], "workload_namespace": ["metadata", "namespace"]},
    "metrics": [
        {
            "name": "workload_placement",
            "help": "The worker that admitted the Workload (status.clusterName; empty while none has).",
            "each": {"type": "Info", "info": {"labelsFromPath": {"worker": ["status", "clusterName"]}}},
        }
    ],
}


def state_config(role: str) -> dict[str, Any]:
    """The custom resource state config of kube-state-metrics on the manager (its MultiKueueClusters'
    conditions, its Workloads' placement) or on a worker (its ClusterQueues)."""
    resources = (
        [*MULTIKUEUE_CLUSTER_STATE["spec"]["resources"], WORKLOAD_PLACEMENT_STATE]
        if role == "manager"
        else [CLUSTER_QUEUE_STATE]
    )
    return {"kind": "CustomResourceStateMetrics", "spec": {"resources": resources}}


class FleetChart(NamedTuple):
    worker: str  # the worker the chart is about; "" for a chart of every worker
    title: str
    query: str  # PromQL
    unit: str  # a Cloud Monitoring unit (dashboard.valid_unit)
    axis_label: str


def check_fleet(
    manager: str | None,
    workers: Sequence[str],
    clusters: Mapping[str, str] | None = None,
    *,
    keys: tuple[str, str, str] = ("manager", "workers[{i}]", "clusters[{i}]"),
) -> list[str]:
    """Every problem with the names, as `<arg>: <reason>` lines; none for a fleet the charts fit.

    `workers` are the MultiKueueClusters' names; `clusters` each one's GKE cluster name where it is
    not the same (a fleet's worker `us-east` runs in the cluster `gpu-fleet-us-east`). `manager` None:
    not known yet (checked once it is). `keys` names the manager, a worker and its cluster in the
    lines (`{i}` the worker's index), for a component that takes them under other names."""
    problems = Problems()
    manager_key, worker_key, cluster_key = keys
    allowed = "at most 40 lowercase letters, digits and hyphens, starting with a letter (a GKE cluster name)"
    clusters = clusters or {}

    def named(path: str, name: object) -> bool:
        if isinstance(name, str) and K8S_NAME.fullmatch(name) and len(name) <= 40:
            return True
        problems.add(path, f"{cut(name)} is not a cluster name; use {allowed}")
        return False

    if manager is not None:
        named(manager_key, manager)
    if not workers:
        problems.add(
            worker_key.split("[")[0], "[] names no worker; list the worker clusters the manager dispatches to"
        )
    seen: dict[str, int] = {}
    seen_clusters: dict[str, int] = {}
    for index, worker in enumerate(workers):
        path = worker_key.format(i=index)
        if not named(path, worker):
            continue
        if worker in seen:
            problems.add(path, f"{cut(worker)} is listed twice (also at [{seen[worker]}])")
            continue
        seen[worker] = index
        cluster, cluster_path = clusters.get(worker, worker), cluster_key.format(i=index)
        if worker in clusters and not named(cluster_path, cluster):
            continue
        where = cluster_path if worker in clusters else path
        if cluster == manager:
            problems.add(where, f"{cut(cluster)} is the manager; a worker is another cluster")
        elif cluster in seen_clusters:
            problems.add(
                where,
                f"{cut(cluster)} is the cluster of worker [{seen_clusters[cluster]}] too: "
                "the charts tell workers apart by their cluster's name",
            )
        else:
            seen_clusters[cluster] = index
    return problems.items


def _require(manager: str, workers: Sequence[str], clusters: Mapping[str, str] | None = None) -> None:
    problems = check_fleet(manager, workers, clusters)
    if problems:
        raise ValueError("fleet monitoring: " + "; ".join(problems))


def fleet_charts(
    manager: str, workers: Sequence[str], clusters: Mapping[str, str] | None = None
) -> list[FleetChart]:
    """Per worker: its workloads admitted and pending, and the GPUs its admitted workloads use (its
    ClusterQueues, the series of its GKE cluster, `clusters[worker]`, defaulting to the worker's name);
    then, for all workers, the workloads each runs as the manager sees it and whether the manager
    reaches each (by the MultiKueueCluster's name)."""
    _require(manager, workers, clusters)
    charts = []
    for worker in workers:
        on = f'cluster="{(clusters or {}).get(worker, worker)}"'
        charts += [
            FleetChart(
                worker,
                f"{worker}: workloads admitted and pending",
                f'label_replace(sum({ADMITTED_METRIC}{{{on}}}), "status", "admitted", "", "") '
                f'or label_replace(sum({PENDING_METRIC}{{{on}}}), "status", "pending", "", "")',
                "1",
                "workloads",
            ),
            FleetChart(
                worker,
                f"{worker}: GPUs used by admitted workloads",
                f"sum by (flavor) ({GPUS_METRIC}{{{on}}})",
                "1",
                "GPUs",
            ),
        ]
    names = "|".join(workers)
    charts += [
        FleetChart(
            "",
            "Workloads each worker runs (the manager's Workloads by status.clusterName)",
            f'count by (worker) ({PLACEMENT_METRIC}{{cluster="{manager}",worker=~"{names}"}})',
            "1",
            "workloads",
        ),
        FleetChart(
            "",
            "Worker reachable from the manager (1 yes, 0 no)",
            f"max by (name) ({_condition(manager, names, '=~')})",
            "1",
            "reachable",
        ),
    ]
    return charts


def _condition(manager: str, name: str, match: str = "=") -> str:
    return (
        f'{CONDITION_METRIC}{{cluster="{manager}",customresource_kind="MultiKueueCluster",'
        f'type="Active",name{match}"{name}"}}'
    )


def worker_unreachable_query(manager: str, workers: Sequence[str]) -> str:
    """PromQL: one series per worker whose MultiKueueCluster is not Active, or has no series at all
    (no MultiKueueCluster of that name, or nothing reports it: either way the manager cannot be seen
    to reach it)."""
    _require(manager, workers)
    names = "|".join(workers)
    inactive = f"max by (cluster, name) ({_condition(manager, names, '=~')}) < 1"
    missing = " or ".join(f"max by (cluster, name) (absent({_condition(manager, w)}))" for w in workers)
    return f"({inactive}) or {missing}"


def worker_unreachable_rule(manager: str, workers: Sequence[str]) -> AlertRule:
    """The alert, in the form gpu_monitoring.py turns into a Cloud Monitoring alert policy."""
    minutes = UNREACHABLE_FOR_S // 60
    return AlertRule(
        key="fleet-worker-unreachable",
        alert="MultiKueueWorkerUnreachable",
        display_name=f"MultiKueue worker unreachable from {manager}",
        condition=f"a worker's MultiKueueCluster not Active for {minutes} min",
        query=worker_unreachable_query(manager, workers),
        duration=f"{UNREACHABLE_FOR_S}s",
        severity="CRITICAL",
        documentation=(
            f"The MultiKueue manager `{manager}` has not reached the worker named in the `name` label for "
            f"{minutes} minutes (its MultiKueueCluster's `Active` condition is not True, or no series "
            "reports it). Jobs are not dispatched there, and after Kueue's `workerLostTimeout` (15 "
            "minutes by default) the ones placed there are requeued elsewhere. Look at the reason: "
            "`kubectl get multikueuecluster <name> -o jsonpath='{.status.conditions}'` on the manager "
            "(a kubeconfig Secret missing or expired, the worker's control plane unreachable)."
        ),
    )


def fleet_tiles(
    manager: str,
    workers: Sequence[str],
    clusters: Mapping[str, str] | None = None,
    *,
    y: int = 0,
    columns: int = 48,
) -> list[dict[str, Any]]:
    """The fleet section as mosaic tiles from row `y`: a note, then two charts a row."""
    note = (
        f"MultiKueue fleet of {manager}: per worker, its ClusterQueues' state (admitted and pending "
        "workloads, GPUs used by admitted workloads); then the workloads each worker runs, as the "
        "manager's Workloads say, and whether the manager reaches each worker (its MultiKueueCluster's "
        "Active condition). All through kube-state-metrics in each cluster, with no stored token."
    )
    tiles: list[dict[str, Any]] = [
        {
            "xPos": 0,
            "yPos": y,
            "width": columns,
            "height": 4,
            "widget": {"title": "MultiKueue fleet", "text": {"content": note, "format": "MARKDOWN"}},
        }
    ]
    half, height = columns // 2, 16
    for index, chart in enumerate(fleet_charts(manager, workers, clusters)):
        row, column = divmod(index, 2)
        tiles.append(
            {
                "xPos": column * half,
                "yPos": y + 4 + row * height,
                "width": half,
                "height": height,
                "widget": promql_widget(chart),
            }
        )
    return tiles


def fleet_dashboard(
    manager: str, workers: Sequence[str], clusters: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A Cloud Monitoring dashboard document of the fleet section alone."""
    return {
        "displayName": f"MultiKueue fleet {manager}",
        "mosaicLayout": {"columns": 48, "tiles": fleet_tiles(manager, workers, clusters)},
    }
