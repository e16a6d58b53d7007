"""Fleet monitoring (gke_gpu.monitoring.fleet): the per-worker charts and the worker-unreachable alert,
each query run by Prometheus' own engine (`promtool test rules`) over series shaped as kube-state-metrics
v2.20.0 reports the state of Kueue v0.19.2's objects (the custom resource state config `state_config`:
`kube_customresource_<name>` with the resource's group, version and kind as labels), after Managed
Prometheus (its target labels `project_id`, `location`, `cluster`, `namespace`, `job`, `instance`
forced over the metric's own). Every scenario carries series the queries must leave out: another
manager's, an undeclared worker's or cluster's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.monitoring import kube_state_metrics
from gke_gpu.monitoring.alert_rules import EVALUATION_INTERVAL, RULE_GROUP, prometheus_rules
from gke_gpu.monitoring.dashboard import valid_unit
from gke_gpu.monitoring.fleet import (
    ADMITTED_METRIC,
    CONDITION_METRIC,
    GPUS_METRIC,
    MULTIKUEUE_CLUSTER_STATE,
    PENDING_METRIC,
    PLACEMENT_METRIC,
    UNREACHABLE_FOR_S,
    check_fleet,
    fleet_charts,
    fleet_dashboard,
    state_config,
    worker_unreachable_rule,
)
from tests.test_alert_rules import assert_passes, run_promtool, samples, series
from tests.test_alert_rules import promtool as promtool  # the session fixture
from tests.test_monitoring import parse_with_google_types
from tests.test_serving_dashboard import expr_test, run_expr_tests

CRDS = Path(__file__).parent / "schemas" / "crds" / "kueue.x-k8s.io"
MANAGER = "fleet-manager"
WORKERS = ["gpu-us-east", "gpu-eu-west", "gpu-asia"]


def test_the_dashboard_parses_with_googles_types_and_every_unit_is_cloud_monitorings() -> None:
    document = fleet_dashboard(MANAGER, WORKERS)
    parsed = parse_with_google_types(document)
    assert parsed["tiles"] == 1 + 2 * len(WORKERS) + 2
    for tile in document["mosaicLayout"]["tiles"][1:]:
        (data_set,) = tile["widget"]["xyChart"]["dataSets"]
        assert valid_unit(data_set["timeSeriesQuery"]["unitOverride"])
    titles = [t["widget"]["title"] for t in document["mosaicLayout"]["tiles"]]
    for worker in WORKERS:
        assert f"{worker}: workloads admitted and pending" in titles
        assert f"{worker}: GPUs used by admitted workloads" in titles


def test_bad_fleets_are_refused_with_every_problem_named() -> None:
    problems = check_fleet("Manager", ["gpu-a", "gpu-a", "Manager", "x" * 41, ""])
    not_a_name = (
        "is not a cluster name; use at most 40 lowercase letters, digits and hyphens, starting with a "
        "letter (a GKE cluster name)"
    )
    # One problem per worker (a name that is no cluster name is not also "the manager").
    assert problems == [
        f"manager: 'Manager' {not_a_name}",
        "workers[1]: 'gpu-a' is listed twice (also at [0])",
        f"workers[2]: 'Manager' {not_a_name}",
        f"workers[3]: '{'x' * 41}' {not_a_name}",
        f"workers[4]: '' {not_a_name}",
    ]
    # A worker's GKE cluster, where its name is not its MultiKueueCluster's, is checked the same way.
    assert check_fleet(MANAGER, ["a", "b", "c"], {"a": MANAGER, "b": "Bad", "c": "gpu-c"}) == [
        f"clusters[0]: '{MANAGER}' is the manager; a worker is another cluster",
        f"clusters[1]: 'Bad' {not_a_name}",
    ]
    assert check_fleet(MANAGER, ["a", "b"], {"a": "gpu-x", "b": "gpu-x"}) == [
        "clusters[1]: 'gpu-x' is the cluster of worker [0] too: the charts tell workers apart by their "
        "cluster's name"
    ]
    with pytest.raises(ValueError, match="is the manager"):
        worker_unreachable_rule(MANAGER, [MANAGER])
    assert check_fleet(MANAGER, []) == [
        "workers: [] names no worker; list the worker clusters the manager dispatches to"
    ]
    with pytest.raises(ValueError, match=r"workers\[1\]: 'gpu-a' is listed twice"):
        fleet_charts(MANAGER, ["gpu-a", "gpu-a"])
    assert check_fleet(MANAGER, WORKERS) == []


def test_the_state_config_makes_the_metric_the_alert_reads() -> None:
    """kube-state-metrics names a custom resource metric `kube_customresource_<name>` and labels it with
    the resource's group, version and kind (customresourcestate-metrics.md, v2.20.0)."""
    (resource,) = MULTIKUEUE_CLUSTER_STATE["spec"]["resources"]
    (metric,) = resource["metrics"]
    assert f"kube_customresource_{metric['name']}" == CONDITION_METRIC
    assert resource["groupVersionKind"] == {
        "group": "kueue.x-k8s.io",
        "version": "v1beta2",
        "kind": "MultiKueueCluster",
    }
    assert metric["each"]["gauge"] == {
        "path": ["status", "conditions"],
        "labelsFromPath": {"type": ["type"]},
        "valueFrom": ["status"],
    }


def test_the_state_configs_make_the_metrics_the_charts_read() -> None:
    """Each chart's metric is one the role's config makes, from the field Kueue's CRD has."""
    worker = {m["name"]: m["each"] for r in state_config("worker")["spec"]["resources"] for m in r["metrics"]}
    assert {f"kube_customresource_{n}" for n in worker} == {PENDING_METRIC, ADMITTED_METRIC, GPUS_METRIC}
    assert worker["clusterqueue_gpus_in_use"]["gauge"]["valueFrom"] == [
        "resources",
        "[name=nvidia.com/gpu]",
        "total",
    ]
    manager = {m["name"] for r in state_config("manager")["spec"]["resources"] for m in r["metrics"]}
    assert {f"kube_customresource_{n}" for n in manager} == {CONDITION_METRIC, PLACEMENT_METRIC}


def test_the_state_configs_read_fields_kueues_crds_have() -> None:
    """Every path of the configs is a field of the vendored v1beta2 CRDs (kueue v0.19.2). The Workload
    CRD (1.4 MB) is not vendored: its `status.clusterName` is apis/kueue/v1beta2/workload_types.go:706."""

    def schema(kind: str) -> dict[str, Any]:
        path = CRDS / f"kueue.x-k8s.io_{kind.lower()}s.yaml"
        crd = yaml.safe_load(path.read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
        return version["schema"]["openAPIV3Schema"]

    def walk(node: dict[str, Any], path: list[str]) -> dict[str, Any]:
        for part in path:
            if part.startswith("["):
                continue  # a list lookup: the item's own fields follow
            node = node.get("items", node)["properties"][part]
        return node

    for role in ("manager", "worker"):
        for resource in state_config(role)["spec"]["resources"]:
            if resource["groupVersionKind"]["kind"] == "Workload":
                continue
            root = schema(resource["groupVersionKind"]["kind"])
            for each in (m["each"] for m in resource["metrics"]):
                body = each.get("gauge") or each.get("info") or {}
                base = walk(root, body.get("path", []))
                for path in [body.get("valueFrom", []), *body.get("labelsFromPath", {}).values()]:
                    if path:
                        walk(base, path)


# -- the charts over kube-state-metrics' series ------------------------------------------------------


def ksm(cluster: str, metric_kind: str, **labels: str) -> dict[str, str]:
    """A kube-state-metrics series of a Kueue object as Managed Prometheus stores it."""
    return {
        "project_id": "test-project",
        "location": "us-east4",
        "cluster": cluster,
        "namespace": kube_state_metrics.APP,
        "job": kube_state_metrics.APP,
        "instance": f"{kube_state_metrics.APP}-5c6d7-q8w2n:{kube_state_metrics.METRICS_PORT_NAME}",
        "customresource_group": "kueue.x-k8s.io",
        "customresource_kind": metric_kind,
        "customresource_version": "v1beta2",
        **labels,
    }


def value(metric: str, labels: dict[str, str], number: float) -> dict[str, str]:
    return {"series": series(metric, labels), "values": samples((number, 41))}


def placed(manager: str, workload: str, worker: str) -> dict[str, str]:
    return ksm(manager, "Workload", name=workload, workload_namespace="team-a", worker=worker)


CQ = "ClusterQueue"
CHART_SERIES = [
    # gpu-us-east: two ClusterQueues.
    value(ADMITTED_METRIC, ksm("gpu-us-east", CQ, name="gpu-h100-team-a"), 3),
    value(ADMITTED_METRIC, ksm("gpu-us-east", CQ, name="gpu-h100-team-b"), 1),
    value(PENDING_METRIC, ksm("gpu-us-east", CQ, name="gpu-h100-team-a"), 3),
    value(PENDING_METRIC, ksm("gpu-us-east", CQ, name="gpu-h100-team-b"), 4),
    value(GPUS_METRIC, ksm("gpu-us-east", CQ, name="gpu-h100-team-a", flavor="gpu-h100"), 24),
    value(GPUS_METRIC, ksm("gpu-us-east", CQ, name="gpu-h100-team-b", flavor="gpu-h100"), 8),
    # gpu-eu-west: one queue, nothing pending.
    value(ADMITTED_METRIC, ksm("gpu-eu-west", CQ, name="gpu-h200-team-a"), 2),
    value(PENDING_METRIC, ksm("gpu-eu-west", CQ, name="gpu-h200-team-a"), 0),
    value(GPUS_METRIC, ksm("gpu-eu-west", CQ, name="gpu-h200-team-a", flavor="gpu-h200"), 16),
    # A cluster the fleet does not name.
    value(ADMITTED_METRIC, ksm("someone-else", CQ, name="gpu-h100-team-a"), 9),
    # The manager's Workloads: three placed on gpu-us-east, one on gpu-eu-west, one waiting (no
    # worker yet), one on a worker the fleet does not name; and another manager's.
    *(
        value(PLACEMENT_METRIC, placed(manager, f"job-{i}", worker), 1)
        for i, (manager, worker) in enumerate(
            [(MANAGER, "gpu-us-east")] * 3
            + [(MANAGER, "gpu-eu-west"), (MANAGER, ""), (MANAGER, "stranger")]
            + [("other-manager", "gpu-eu-west")]
        )
    ),
]  # fmt: skip


def test_every_chart_over_kube_state_metrics_series(promtool: str, tmp_path: Path) -> None:
    charts = {c.title: c.query for c in fleet_charts(MANAGER, WORKERS)}
    expected: dict[str, list[tuple[dict[str, str], float]]] = {
        "gpu-us-east: workloads admitted and pending": [
            ({"status": "admitted"}, 4),
            ({"status": "pending"}, 7),
        ],
        "gpu-eu-west: workloads admitted and pending": [
            ({"status": "admitted"}, 2),
            ({"status": "pending"}, 0),
        ],
        "gpu-asia: workloads admitted and pending": [],
        "gpu-us-east: GPUs used by admitted workloads": [({"flavor": "gpu-h100"}, 32)],
        "gpu-eu-west: GPUs used by admitted workloads": [({"flavor": "gpu-h200"}, 16)],
        "Workloads each worker runs (the manager's Workloads by status.clusterName)": [
            ({"worker": "gpu-us-east"}, 3),
            ({"worker": "gpu-eu-west"}, 1),
        ],
    }
    tests = [expr_test(charts[title], samples_) for title, samples_ in expected.items()]
    assert_passes(run_expr_tests(promtool, tmp_path, CHART_SERIES, tests))


def test_a_wrong_metric_name_fails_the_chart_test(promtool: str, tmp_path: Path) -> None:
    query = {c.title: c.query for c in fleet_charts(MANAGER, WORKERS)}[
        "gpu-eu-west: workloads admitted and pending"
    ]
    stale = query.replace(PENDING_METRIC, "kueue_pending_workloads")
    result = run_expr_tests(
        promtool,
        tmp_path,
        CHART_SERIES,
        [expr_test(stale, [({"status": "admitted"}, 2), ({"status": "pending"}, 0)])],
    )
    assert result.returncode != 0


# -- the alert over MultiKueueCluster conditions ----------------------------------------------------


def condition(worker: str, *, manager: str = MANAGER) -> str:
    """kube-state-metrics' gauge of a MultiKueueCluster's Active condition, after Managed Prometheus:
    the target labels of the manager's MultiKueueStateMetrics (its namespace; `job` its PodMonitoring's
    name, `instance` `<pod>:<port name>`: prometheus-engine pod_config.go), its targetLabels adding
    none."""
    return series(
        CONDITION_METRIC,
        {
            "project_id": "test-project",
            "location": "us-central1",
            "cluster": manager,
            "namespace": kube_state_metrics.APP,
            "job": kube_state_metrics.APP,
            "instance": f"{kube_state_metrics.APP}-5c6d7-q8w2n:{kube_state_metrics.METRICS_PORT_NAME}",
            "customresource_group": "kueue.x-k8s.io",
            "customresource_kind": "MultiKueueCluster",
            "customresource_version": "v1beta2",
            "name": worker,
            "type": "Active",
        },
    )


def rules_file(manager: str, workers: list[str]) -> dict[str, Any]:
    """The rules file of the alert as gpu_monitoring's policy carries it (query, duration, group)."""
    rule = worker_unreachable_rule(manager, workers)
    policy = {
        "conditions": [
            {
                "displayName": rule.condition,
                "conditionPrometheusQueryLanguage": {
                    "query": rule.query,
                    "duration": rule.duration,
                    "evaluationInterval": EVALUATION_INTERVAL,
                    "ruleGroup": RULE_GROUP,
                    "alertRule": rule.alert,
                },
            }
        ]
    }
    return prometheus_rules([policy])


# 30 s scrapes for 30 minutes. gpu-us-east is reachable throughout; gpu-eu-west loses its connection
# at minute 5 for good; gpu-asia blips for 6 minutes (Kueue's retries heal it) from minute 2; a fourth
# MultiKueueCluster the fleet does not name is down, and so is another manager's view of gpu-eu-west.
ALERT_SERIES = [
    {"series": condition("gpu-us-east"), "values": samples((1, 61))},
    {"series": condition("gpu-eu-west"), "values": samples((1, 10), (0, 51))},
    {"series": condition("gpu-asia"), "values": samples((1, 4), (0, 12), (1, 45))},
    {"series": condition("stranger"), "values": samples((0, 61))},
    {"series": condition("gpu-eu-west", manager="other-manager"), "values": samples((0, 61))},
]


def firing(worker: str) -> dict[str, Any]:
    return {"exp_labels": {"cluster": MANAGER, "name": worker}}


def test_the_alert_fires_for_a_worker_lost_for_the_sustained_period_only(
    promtool: str, tmp_path: Path
) -> None:
    lost_at = 5
    assert UNREACHABLE_FOR_S == 600
    tests = [
        {
            "interval": "30s",
            "input_series": ALERT_SERIES,
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": "MultiKueueWorkerUnreachable", "exp_alerts": []},
                # Not Active for 9 minutes: pending, not firing (the blip of gpu-asia never gets here).
                {
                    "eval_time": f"{lost_at + 9}m",
                    "alertname": "MultiKueueWorkerUnreachable",
                    "exp_alerts": [],
                },
                {
                    "eval_time": f"{lost_at + 11}m",
                    "alertname": "MultiKueueWorkerUnreachable",
                    "exp_alerts": [firing("gpu-eu-west")],
                },
                {
                    "eval_time": "29m",
                    "alertname": "MultiKueueWorkerUnreachable",
                    "exp_alerts": [firing("gpu-eu-west")],
                },
            ],
        }
    ]
    assert_passes(run_promtool(promtool, tmp_path, rules_file(MANAGER, WORKERS), tests))


def test_a_worker_nothing_reports_fires_too(promtool: str, tmp_path: Path) -> None:
    """No series for a named worker (no MultiKueueCluster of that name, or kube-state-metrics not
    running): the manager cannot be seen to reach it, which after the period is the same alarm."""
    tests = [
        {
            "interval": "30s",
            "input_series": [s for s in ALERT_SERIES if "gpu-asia" not in s["series"]],
            "alert_rule_test": [
                {"eval_time": "9m", "alertname": "MultiKueueWorkerUnreachable", "exp_alerts": []},
                {
                    "eval_time": "20m",
                    "alertname": "MultiKueueWorkerUnreachable",
                    "exp_alerts": [firing("gpu-eu-west"), firing("gpu-asia")],
                },
            ],
        }
    ]
    assert_passes(run_promtool(promtool, tmp_path, rules_file(MANAGER, WORKERS), tests))
