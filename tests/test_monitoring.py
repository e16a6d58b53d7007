"""GPU monitoring: DCGM modes, the dashboard as code, alert policies, and their bad inputs."""

from __future__ import annotations

import json
import warnings

import pytest
from google.protobuf.json_format import ParseError

from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tools.offline import run_stack

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # google-api-core's Python 3.11 end-of-life notice
    from google.cloud.monitoring_dashboard_v1 import types as dashboard_types

CHANNEL = "projects/test-project/notificationChannels/42"


def dashboard_document(result) -> dict:
    board = result.one("gcp:monitoring/dashboard:Dashboard")
    return json.loads(board.inputs["dashboardJson"])


def parse_with_google_types(document: dict):
    """Google's own dashboard types: an unknown or misspelt field raises."""
    return dashboard_types.Dashboard.from_json(json.dumps(document), ignore_unknown_fields=False)


# -- DCGM modes -----------------------------------------------------------------------------------


def test_managed_dcgm_is_switched_on_in_the_cluster() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL]))
    components = result.one("gcp:container/cluster:Cluster").inputs["monitoringConfig"]["enableComponents"]
    assert "DCGM" in components
    assert result.of_type("gke-gpu:monitoring:DcgmExporter") == []


def test_exporter_mode_deploys_the_exporter_and_turns_managed_dcgm_off() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[{**L4_POOL, "spot": True}], monitoring={"dcgm": "exporter"}
        )
    )
    components = result.one("gcp:container/cluster:Cluster").inputs["monitoringConfig"]["enableComponents"]
    assert components == ["SYSTEM_COMPONENTS"], "no duplicate series from managed DCGM"
    ds = result.one("kubernetes:apps/v1:DaemonSet").inputs
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    assert container["image"].split(":")[1], "pinned tag"
    assert container["resources"]["limits"] and container["resources"]["requests"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"] == "device-name"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    host_paths = {v["hostPath"]["path"] for v in pod["volumes"]}
    assert host_paths == {"/home/kubernetes/bin/nvidia", "/var/lib/kubelet/pod-resources"}
    assert all(m.get("readOnly") for m in container["volumeMounts"])
    assert pod["automountServiceAccountToken"] is False
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms[0]["matchExpressions"] == [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert {
        "key": "cloud.google.com/gke-spot",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    service = result.one("kubernetes:core/v1:Service").inputs
    assert service["spec"]["ports"][0]["port"] == 9400
    monitor = result.one("kubernetes:monitoring.googleapis.com/v1:PodMonitoring").inputs
    assert monitor["spec"]["selector"]["matchLabels"] == ds["spec"]["selector"]["matchLabels"]
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "interval": "30s"}]
    assert monitor["metadata"]["namespace"] == ds["metadata"]["namespace"] == "gpu-monitoring"


def test_dcgm_none_turns_managed_dcgm_off_and_drops_the_dcgm_section() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring={"dcgm": "none"}))
    assert result.one("gcp:container/cluster:Cluster").inputs["monitoringConfig"]["enableComponents"] == [
        "SYSTEM_COMPONENTS"
    ]
    titles = [t["widget"]["title"] for t in dashboard_document(result)["mosaicLayout"]["tiles"]]
    assert "GPU duty cycle by node (%)" in titles
    assert not any("DCGM" in t for t in titles)


# -- Dashboard ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_dashboards_parse_with_googles_types(stack: str) -> None:
    document = dashboard_document(run_stack(stack))
    parsed = parse_with_google_types(document)
    assert parsed.display_name.startswith("GPUs: ")
    assert len(parsed.mosaic_layout.tiles) == len(document["mosaicLayout"]["tiles"])


def test_the_google_types_catch_a_typo() -> None:
    document = dashboard_document(run_stack("prod"))
    document["mosaicLayout"]["tiles"][1]["widget"]["scorecard"]["timeSeriesQuery"]["timeSeriesFilterr"] = {}
    with pytest.raises(ParseError, match="timeSeriesFilterr"):
        parse_with_google_types(document)


def test_dashboard_covers_the_gpu_signals_for_this_cluster() -> None:
    document = dashboard_document(run_stack("prod"))
    text = json.dumps(document)
    for metric in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "kubernetes.io/node/accelerator/duty_cycle",
        "kubernetes.io/node/accelerator/memory_used",
        "kubernetes.io/container/accelerator/request",
    ):
        assert metric in text, metric
    queries = [
        ds["timeSeriesQuery"]["timeSeriesFilter"]["filter"]
        for tile in document["mosaicLayout"]["tiles"]
        for ds in tile["widget"].get("xyChart", {}).get("dataSets", [])
    ]
    assert queries and all('"gpu-prod"' in q for q in queries), "every chart is pinned to this cluster"
    filters = {(f["filterType"], f["labelKey"]) for f in document["dashboardFilters"]}
    assert ("RESOURCE_LABEL", "cluster_name") in filters
    assert ("USER_METADATA_LABEL", "cloud.google.com/gke-nodepool") in filters
    by_model = [t for t in document["mosaicLayout"]["tiles"] if "accelerator model" in t["widget"]["title"]]
    assert by_model, "a per-accelerator-model view"
    tiles = document["mosaicLayout"]["tiles"]
    for tile in tiles:
        assert tile["xPos"] + tile["width"] <= document["mosaicLayout"]["columns"]


def test_dashboard_url_is_a_stack_output() -> None:
    result = render(
        stack_config(cluster=AUTOPILOT_CLUSTER, gpuPools=[{"name": "l4", "accelerator": "nvidia-l4"}]),
        preview=False,
    )
    url = result.outputs["monitoring"]["dashboardUrl"]
    assert (
        url
        == "https://console.cloud.google.com/monitoring/dashboards/builder/monitoring-dashboard?project=test-project"
    )


def test_no_dashboard_when_turned_off() -> None:
    result = render(stack_config(cluster=AUTOPILOT_CLUSTER, monitoring={"dashboard": False}))
    assert result.of_type("gcp:monitoring/dashboard:Dashboard") == []
    assert result.outputs["monitoring"]["dashboardUrl"] is None


# -- Alerts ---------------------------------------------------------------------------------------


def alerts(**extra):
    return {"enabled": True, "notificationChannels": [CHANNEL], **extra}


def test_idle_gpu_alert_notifies_the_channel() -> None:
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring={"alerts": alerts()})
    )
    (policy,) = result.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    inputs = policy.inputs
    assert inputs["notificationChannels"] == [CHANNEL]
    condition = inputs["conditions"][0]["conditionPrometheusQueryLanguage"]
    assert "DCGM_FI_DEV_GPU_UTIL" in condition["query"]
    assert "[10m])) < 5" in condition["query"]
    assert condition["duration"] == "7200s", "idle for the whole configured time, not averaged over it"
    assert 'cluster="gpu-test"' in condition["query"]
    assert condition["disableMetricValidation"] is True


def test_without_dcgm_the_idle_alert_uses_gke_duty_cycle() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4_POOL],
            monitoring={"dcgm": "none", "alerts": alerts(idleGpuMinutes=60, idleGpuUtilizationPercent=2)},
        )
    )
    (policy,) = result.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    condition = policy.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]
    query = condition["query"]
    # Every GPU that exists (memory_total), unless it was busy: an idle GPU with no duty-cycle
    # sample still alerts.
    assert query.startswith(
        "max by (cluster_name, node_name, accelerator_id) (kubernetes_io:node_accelerator_memory_total"
    )
    assert "unless on (cluster_name, node_name, accelerator_id)" in query
    assert "kubernetes_io:node_accelerator_duty_cycle" in query
    assert ">= 2" in query
    assert condition["duration"] == "3600s"


def test_xid_alert_only_where_the_metric_exists() -> None:
    exporter = render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring={"dcgm": "exporter", "alerts": alerts()}
        )
    )
    names = sorted(
        p.inputs["displayName"] for p in exporter.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    )
    assert names == ["GPU XID error on gpu-test", "GPU idle on gpu-test"]
    xid = next(
        p
        for p in exporter.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
        if "XID" in p.inputs["displayName"]
    )
    xid_query = xid.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert "changes(DCGM_FI_DEV_XID_ERRORS" in xid_query, "the gauge keeps the last code: alert on a change"
    managed = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring={"alerts": alerts()})
    )
    assert len(managed.of_type("gcp:monitoring/alertPolicy:AlertPolicy")) == 1, (
        "GKE's DCGM exports no XID field"
    )


def test_no_alerts_by_default() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL]))
    assert result.of_type("gcp:monitoring/alertPolicy:AlertPolicy") == []


def test_prod_has_alerts_dev_does_not() -> None:
    assert run_stack("prod").of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    assert not run_stack("dev").of_type("gcp:monitoring/alertPolicy:AlertPolicy")


# -- Bad input ------------------------------------------------------------------------------------


def test_alerts_without_a_channel() -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "monitoring": {"alerts": {"enabled": True}}})
    assert "gke-gpu:monitoring.alerts.notificationChannels: required when alerts.enabled is true" in message


def test_alerts_with_a_malformed_channel() -> None:
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "monitoring": {"alerts": {"enabled": True, "notificationChannels": ["42"]}},
        }
    )
    assert (
        "gke-gpu:monitoring.alerts.notificationChannels[0]: '42' is not allowed; expected "
        "projects/<project>/notificationChannels/<numeric id>"
    ) in message


def test_managed_dcgm_with_driver_installation_disabled() -> None:
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [{**L4_POOL, "driverVersion": "INSTALLATION_DISABLED"}]}
    )
    assert "gke-gpu:gpuPools[0].driverVersion: 'INSTALLATION_DISABLED' is not allowed with" in message
    assert "monitoring.dcgm managed" in message


def test_exporter_on_autopilot() -> None:
    message = config_error({"cluster": AUTOPILOT_CLUSTER, "monitoring": {"dcgm": "exporter"}})
    assert "gke-gpu:monitoring.dcgm: 'exporter' is not allowed on Autopilot" in message


def test_unknown_dcgm_mode() -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "monitoring": {"dcgm": "prometheus"}})
    assert (
        "gke-gpu:monitoring.dcgm: 'prometheus' is not allowed; allowed: 'managed', 'exporter' or 'none'"
        in message
    )


def test_dashboard_with_no_cluster_to_watch() -> None:
    message = config_error({"cluster": {"mode": "existing", "flavor": "gke", "kubeconfig": "apiVersion: v1"}})
    assert "gke-gpu:cluster.name: required when monitoring.dashboard or monitoring.alerts is on" in message
    message = config_error(
        {"cluster": {"mode": "existing", "flavor": "gke", "kubeconfig": "x", "name": "c"}}, project=None
    )
    assert "gcp:project: required (needed for the dashboard or alerts)" in message
