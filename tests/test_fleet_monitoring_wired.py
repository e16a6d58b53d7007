"""The fleet's monitoring wired into the fleet: on the manager, GpuMonitoring's `fleet_workers` gives a
dashboard of the fleet and the worker-unreachable alert policy (monitoring/fleet.py); a stack without a
fleet has neither; bad workers are refused at GpuMonitoring's boundary, before anything is declared."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.monitoring.fleet import worker_unreachable_query
from gke_gpu.monitoring.gpu_monitoring import GpuMonitoring, GpuMonitoringArgs
from tests.conftest import stack_render
from tests.test_fleet import STACK_FILE, errors, fleet_raw
from tests.test_monitoring import parse_with_google_types
from tools.offline import RunResult, run_program

DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
MANAGER = STACK_FILE["gke-gpu:cluster"]["name"]
# The example's workers: each MultiKueueCluster's name, and its GKE cluster's (the stack's default).
WORKERS = {"us-east": f"{MANAGER}-us-east", "us-central": f"{MANAGER}-us-central"}


@pytest.fixture(scope="module")
def fleet() -> RunResult:
    result = stack_render("fleet")
    assert result.error is None, result.error
    return result


def fleet_board(result: RunResult) -> dict[str, Any]:
    return json.loads(result.one(DASHBOARD, "monitoring-fleet-dashboard").inputs["dashboardJson"])


def test_the_fleet_render_has_the_fleets_dashboard_with_every_workers_charts(fleet: RunResult) -> None:
    board = fleet_board(fleet)
    assert board["displayName"] == f"MultiKueue fleet {MANAGER}"
    assert parse_with_google_types(board)["tiles"] == 1 + 2 * len(WORKERS) + 2
    queries = {
        t["widget"]["title"]: t["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"]
        for t in board["mosaicLayout"]["tiles"]
        if "xyChart" in t["widget"]
    }
    for worker, cluster in WORKERS.items():
        # A worker's own Kueue series carry its GKE cluster's name, not its MultiKueueCluster's.
        for chart in ("workloads admitted and pending", "GPUs used by admitted workloads"):
            assert f'cluster="{cluster}"' in queries[f"{worker}: {chart}"]
    reachable = queries["Worker reachable from the manager (1 yes, 0 no)"]
    assert f'cluster="{MANAGER}"' in reachable and 'name=~"us-east|us-central"' in reachable
    # The GPU dashboard stays the manager's own, pinned to its cluster.
    gpus = json.loads(fleet.one(DASHBOARD, "monitoring-dashboard").inputs["dashboardJson"])
    assert gpus["displayName"] == f"GPUs: {MANAGER}"
    assert fleet.outputs["monitoring"]["fleetDashboardUrl"]


def test_the_fleet_render_has_the_unreachable_alert_notifying_the_stacks_channels(fleet: RunResult) -> None:
    policy = fleet.one(POLICY, "monitoring-fleet-worker-unreachable").inputs
    (condition,) = policy["conditions"]
    promql = condition["conditionPrometheusQueryLanguage"]
    assert promql["query"] == worker_unreachable_query(MANAGER, list(WORKERS))
    assert promql["alertRule"] == "MultiKueueWorkerUnreachable" and promql["duration"] == "600s"
    channels = STACK_FILE["gke-gpu:monitoring"]["alerts"]["notificationChannels"]
    assert policy["notificationChannels"] == channels
    assert f"MultiKueue worker unreachable from {MANAGER}" in fleet.outputs["monitoring"]["alerts"]
    # The manager runs the kube-state-metrics that reports the alert's series, so the policy is
    # enabled, and the render no longer warns that it is not.
    assert policy["enabled"] is True
    assert not [w for w in fleet.warnings if "worker-unreachable" in w or "kube-state-metrics" in w]


def test_a_stack_without_a_fleet_has_neither() -> None:
    result = stack_render("prod")
    assert result.error is None, result.error
    assert [r.name for r in result.of_type(DASHBOARD)] == ["monitoring-dashboard"]
    assert not [r for r in result.of_type(POLICY) if "fleet" in r.name]
    assert "fleetDashboardUrl" not in result.outputs["monitoring"]


def test_a_fleet_without_alerts_has_its_dashboard_but_no_alert() -> None:
    raw = fleet_raw()
    raw["monitoring"] = {"dashboard": True}
    result = run_program(
        {"gcp:project": STACK_FILE["gcp:project"], "gcp:region": STACK_FILE["gcp:region"]}
        | {f"gke-gpu:{k}": v for k, v in raw.items()}
    )
    assert result.error is None, result.error
    assert result.one(DASHBOARD, "monitoring-fleet-dashboard")
    assert result.of_type(POLICY) == []


def monitoring(**extra: Any) -> RunResult:
    args: GpuMonitoringArgs = {"dcgm": "managed", "cluster_name": MANAGER, **extra}  # type: ignore[typeddict-item]
    return run_program({"gcp:project": "p"}, program=lambda: GpuMonitoring("monitoring", args))


def test_bad_workers_are_refused_at_the_boundary_with_every_problem() -> None:
    result = monitoring(
        fleet_workers=[
            {"name": "us-east", "cluster_name": MANAGER},
            {"name": "us-east"},
            {"name": "Bad_Name"},
            {"name": "eu", "cluster_name": "gpu-eu"},
            {"name": "asia", "cluster_name": "gpu-eu"},
        ]
    )
    assert isinstance(result.error, InvalidArgsError)
    allowed = (
        "use at most 40 lowercase letters, digits and hyphens, starting with a letter (a GKE cluster name)"
    )
    assert result.error.problems == [
        f"fleet_workers[0].cluster_name: '{MANAGER}' is the manager; a worker is another cluster",
        "fleet_workers[1].name: 'us-east' is listed twice (also at [0])",
        f"fleet_workers[2].name: 'Bad_Name' is not a cluster name; {allowed}",
        "fleet_workers[4].cluster_name: 'gpu-eu' is the cluster of worker [3] too: the charts tell "
        "workers apart by their cluster's name",
    ]
    assert result.resources == [], "nothing is declared"


def test_fleet_workers_without_a_dashboard_or_alerts_are_refused() -> None:
    result = monitoring(dashboard=False, fleet_workers=[{"name": "us-east"}])
    assert isinstance(result.error, InvalidArgsError)
    assert result.error.problems[0].startswith("fleet_workers: has no effect without a dashboard or alerts")
    assert monitoring(fleet_workers=[]).error is not None, "an empty fleet is no fleet"


def test_a_worker_cluster_named_as_the_managers_elsewhere_is_refused_by_the_stack() -> None:
    """Managed Prometheus labels a series with its cluster's name only: two clusters of one name in
    different locations would share the fleet's charts."""
    raw = fleet_raw()
    raw["fleet"]["workers"][1]["cluster"]["name"] = MANAGER
    assert (
        f"gke-gpu:fleet.workers[1].cluster.name: '{MANAGER}' in us-central1-a is the name of the manager's "
        "cluster (in europe-west4-a)"
    ) in errors(raw)
