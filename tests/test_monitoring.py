"""GPU monitoring: DCGM modes, the dashboard as code, alert policies, and their bad inputs."""

from __future__ import annotations

import atexit
import functools
import json
import re
import subprocess
import sys
import tempfile
from typing import IO

import pytest

from gke_gpu.core import images
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.monitoring.dashboard import Chart, valid_unit
from gke_gpu.monitoring.dcgm_exporter import COLLECTORS_FILE, DcgmExporter, DcgmExporterArgs, collected_fields
from gke_gpu.monitoring.dcgm_exporter_args import DcgmFlavor
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    config_error,
    render,
    stack_config,
    stack_render,
)
from tests.hang_guard import no_hang
from tools.offline import run_program

# Google's dashboard types run in a child interpreter: googleapis-common-protos and pulumi.provider
# (which other test modules import, and pytest-xdist collects every module in every worker) both
# register google.rpc.Status in protobuf's one default descriptor pool, so one process cannot load
# both. One child per test process parses every dashboard, a JSON document per line (importing the
# types is ~1 s of CPU, which each of six documents paid in a child of its own).
PARSE_WITH_GOOGLE_TYPES = """
import json, sys, warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # google-api-core's Python 3.11 end-of-life notice
    from google.cloud.monitoring_dashboard_v1 import types
from google.protobuf.json_format import ParseError
for line in sys.stdin:
    try:
        board = types.Dashboard.from_json(line, ignore_unknown_fields=False)
    except ParseError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
    else:
        answer = {"display_name": board.display_name, "tiles": len(board.mosaic_layout.tiles)}
        print(json.dumps(answer), flush=True)
"""

CHANNEL = "projects/test-project/notificationChannels/42"


def dashboard_document(result) -> dict:
    board = result.one("gcp:monitoring/dashboard:Dashboard")
    return json.loads(board.inputs["dashboardJson"])


class ParseError(ValueError):
    """Google's types refused the dashboard document."""


def parse_with_google_types(document: dict) -> dict:
    """Google's own dashboard types: an unknown or misspelt field raises ParseError. Returns the
    parsed dashboard's display name and tile count."""
    child, errors = _google_types_child()
    assert child.stdin is not None and child.stdout is not None
    with no_hang():
        child.stdin.write(json.dumps(document) + "\n")
        child.stdin.flush()
        answer = child.stdout.readline()
    if not answer:  # the child is gone: say why
        _google_types_child.cache_clear()
        child.wait(timeout=60)
        errors.seek(0)
        raise AssertionError(f"the dashboard parser exited {child.returncode}: {errors.read().decode()}")
    parsed = json.loads(answer)
    if "error" in parsed:
        raise ParseError(parsed["error"])
    return parsed


@functools.cache
def _google_types_child() -> tuple[subprocess.Popen[str], IO[bytes]]:
    errors = tempfile.TemporaryFile()  # noqa: SIM115 (open as long as the child, closed at exit)
    child = subprocess.Popen(
        [sys.executable, "-c", PARSE_WITH_GOOGLE_TYPES],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )

    def close() -> None:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
        errors.close()

    atexit.register(close)
    return child, errors


# -- DCGM modes -----------------------------------------------------------------------------------


def test_managed_dcgm_is_switched_on_in_the_cluster() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL]))
    components = result.one("gcp:container/cluster:Cluster").inputs["monitoringConfig"]["enableComponents"]
    assert "DCGM" in components
    assert result.of_type("gke-gpu:index:DcgmExporter") == []


def test_exporter_mode_deploys_the_exporter_and_turns_managed_dcgm_off() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[{**L4_POOL, "spot": True}], monitoring={"dcgm": "exporter"}
        )
    )
    components = result.one("gcp:container/cluster:Cluster").inputs["monitoringConfig"]["enableComponents"]
    assert "DCGM" not in components, "no duplicate series from managed DCGM"
    assert "SYSTEM_COMPONENTS" in components and "KUBELET" in components, "GKE's defaults stay"
    ds = result.one("kubernetes:apps/v1:DaemonSet").inputs
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    assert container["image"].split(":")[1], "pinned tag"
    assert container["resources"]["limits"] and container["resources"]["requests"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"] == "device-name"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    host_paths = {v["hostPath"]["path"]: name for name, v in volumes.items() if "hostPath" in v}
    assert set(host_paths) == {"/home/kubernetes/bin/nvidia", "/var/lib/kubelet/pod-resources"}
    assert all(mounts[name].get("readOnly") for name in host_paths.values()), "host paths read-only"
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
    assert monitor["spec"]["targetLabels"] == {"metadata": []}, "the exporter's pod/container labels"
    assert monitor["metadata"]["namespace"] == ds["metadata"]["namespace"] == "gpu-monitoring"


def exporter_stack(**monitoring):
    return render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring={"dcgm": "exporter", **monitoring}
        )
    )


def test_exporter_collects_our_field_list_from_a_config_map() -> None:
    result = exporter_stack()
    config_map = result.one("kubernetes:core/v1:ConfigMap").inputs
    assert config_map["data"] == {"counters.csv": COLLECTORS_FILE.read_text()}
    template = result.one("kubernetes:apps/v1:DaemonSet").inputs["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert container["args"] == ["--collectors", "/etc/dcgm-exporter/gke-gpu/counters.csv"]
    (volume,) = [v for v in template["spec"]["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {"name": volume["name"], "mountPath": "/etc/dcgm-exporter/gke-gpu", "readOnly": True}
    assert len(template["metadata"]["annotations"]["gke-gpu/collectors-sha256"]) == 64, (
        "a change rolls the Pods"
    )


def test_exporter_runs_with_a_read_only_root_and_runtime_default_seccomp() -> None:
    pod = exporter_stack().one("kubernetes:apps/v1:DaemonSet").inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"] == {"privileged": True, "readOnlyRootFilesystem": True}
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/tmp", "/var/log"}
    for volume in pod["volumes"]:
        if volume["name"] in ("tmp", "var-log"):
            assert "emptyDir" in volume


def test_exporter_namespace_is_privileged_but_warns_and_audits() -> None:
    namespace = exporter_stack().one("kubernetes:core/v1:Namespace").inputs["metadata"]
    labels = namespace["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "baseline"
    assert labels["pod-security.kubernetes.io/audit"] == "baseline"


@pytest.mark.parametrize(("configured", "allowed"), [(None, "gmp-system"), ("monitoring", "monitoring")])
def test_only_the_scrapers_namespace_reaches_the_exporter(configured: str | None, allowed: str) -> None:
    result = exporter_stack(**({"scraperNamespace": configured} if configured else {}))
    policy = result.one("kubernetes:networking.k8s.io/v1:NetworkPolicy").inputs
    ds = result.one("kubernetes:apps/v1:DaemonSet").inputs
    assert policy["metadata"]["namespace"] == ds["metadata"]["namespace"]
    assert policy["spec"]["podSelector"] == ds["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == [
        {
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": allowed}}}],
            "ports": [{"port": 9400, "protocol": "TCP"}],
        }
    ]
    assert not policy["spec"].get("egress"), "the exporter opens no connection"


def test_the_exporter_needs_a_scraper_namespace() -> None:
    args: DcgmExporterArgs = {"flavor": DcgmFlavor.GKE}  # type: ignore[typeddict-item]
    result = run_program({}, program=lambda: DcgmExporter("dcgm", args))
    assert isinstance(result.error, InvalidArgsError)
    assert result.error.problems == ["scraper_namespace: required"]
    assert result.resources == [], "nothing is declared"


def test_dcgm_none_turns_managed_dcgm_off_and_drops_the_dcgm_section() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring={"dcgm": "none"}))
    components = result.one("gcp:container/cluster:Cluster").inputs["monitoringConfig"]["enableComponents"]
    assert "DCGM" not in components and "SYSTEM_COMPONENTS" in components
    titles = [t["widget"]["title"] for t in dashboard_document(result)["mosaicLayout"]["tiles"]]
    assert "GPU duty cycle by node (%)" in titles
    assert not any("DCGM" in t for t in titles)


# -- Dashboard ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_dashboards_parse_with_googles_types(stack: str) -> None:
    document = dashboard_document(stack_render(stack))
    parsed = parse_with_google_types(document)
    assert parsed["display_name"].startswith("GPUs: ")
    assert parsed["tiles"] == len(document["mosaicLayout"]["tiles"])


def test_the_google_types_catch_a_typo() -> None:
    document = dashboard_document(stack_render("prod"))
    document["mosaicLayout"]["tiles"][1]["widget"]["scorecard"]["timeSeriesQuery"]["timeSeriesFilterr"] = {}
    with pytest.raises(ParseError, match="timeSeriesFilterr"):
        parse_with_google_types(document)


def test_dashboard_covers_the_gpu_signals_for_this_cluster() -> None:
    document = dashboard_document(stack_render("prod"))
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


def dcgm_fields(text: str) -> set[str]:
    return set(re.findall(r"\bDCGM_FI_[A-Z0-9_]+", text))


def test_every_dcgm_field_the_dashboard_or_an_alert_queries_is_collected() -> None:
    result = exporter_stack(alerts=alerts())
    queries = [json.dumps(dashboard_document(result))] + [
        c["conditionPrometheusQueryLanguage"]["query"]
        for p in result.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
        for c in p.inputs["conditions"]
    ]
    used = set().union(*(dcgm_fields(q) for q in queries))
    assert {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_UTIL"} <= used
    collected = {
        field for field, kind in collected_fields(COLLECTORS_FILE.read_text()).items() if kind != "label"
    }
    assert used - collected == set(), "queried but not collected by the exporter"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization, in %.", "expected 3 fields"),
        ("DCGM_FI_DEV_GPU_UTIL, gauges, GPU utilization.", "not a DCGM field and Prometheus type"),
        ("DCGM_FI_DEV_FB_USED, gauge, a.\nDCGM_FI_DEV_FB_USED, gauge, b.", "listed twice"),
    ],
)
def test_collectors_file_is_read_as_the_exporter_reads_it(line: str, problem: str) -> None:
    assert collected_fields("# comment\n\n" + "DCGM_FI_DEV_GPU_TEMP, gauge, C.\n") == {
        "DCGM_FI_DEV_GPU_TEMP": "gauge"
    }
    with pytest.raises(ValueError, match=problem):
        collected_fields(line)


def test_dcgm_charts_keep_each_mig_instance_apart() -> None:
    document = dashboard_document(stack_render("prod"))
    charts = [
        ds["timeSeriesQuery"]["timeSeriesFilter"]
        for tile in document["mosaicLayout"]["tiles"]
        for ds in tile["widget"].get("xyChart", {}).get("dataSets", [])
    ]
    framebuffer = [c for c in charts if "DCGM_FI_DEV_FB_USED" in c["filter"]]
    assert framebuffer
    for chart in framebuffer:
        assert chart["aggregation"]["groupByFields"] == [
            f'metric.label."{images.DCGM_HOSTNAME_LABEL}"',
            'metric.label."gpu"',
            'metric.label."GPU_I_ID"',
            'metric.label."modelName"',
        ]


def test_every_unit_follows_cloud_monitorings_unit_grammar() -> None:
    document = dashboard_document(stack_render("prod"))
    units = re.findall(r'"unitOverride": "([^"]*)"', json.dumps(document))
    assert {"%", "By", "MiBy", "10^2.%"} <= set(units)
    assert all(valid_unit(u) for u in units), units
    for wrong in ("W", "Cel", "MiB", "percent", "bytes"):
        assert not valid_unit(wrong), wrong
    with pytest.raises(ValueError, match="'W' is not a Cloud Monitoring unit"):
        Chart("Power", "m", "prometheus_target", (), unit="W")


def test_hostname_label_matches_the_pinned_exporter() -> None:
    # dcgm-exporter renames Hostname to hostname after this tag (commit d5e5f51, PR #655): a bump must
    # change DCGM_HOSTNAME_LABEL too, which every node-keyed query uses.
    assert (images.DCGM_EXPORTER.rsplit(":", 1)[1], images.DCGM_HOSTNAME_LABEL) == (
        "4.5.3-4.8.2-ubuntu22.04",
        "Hostname",
    )


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
    condition = xid.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]
    assert condition["query"] == (
        'max by (cluster, Hostname, gpu, err_code, err_msg) (DCGM_FI_DEV_XID_ERRORS{cluster="gpu-test",'
        'err_code=~"[1-9][0-9]*"}) unless max by (cluster, Hostname, gpu, err_code, err_msg) '
        '(DCGM_FI_DEV_XID_ERRORS{cluster="gpu-test",err_code=~"[1-9][0-9]*"} offset 15m)'
    ), "promtool proves it in tests/test_alert_rules.py"
    assert (condition["duration"], condition["ruleGroup"], condition["alertRule"]) == (
        "0s",
        "gke-gpu",
        "GpuXidError",
    )
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
    assert stack_render("prod").of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    assert not stack_render("dev").of_type("gcp:monitoring/alertPolicy:AlertPolicy")


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


def test_the_cluster_name_may_be_another_components_output():
    """In YAML or TypeScript, `clusterName: ${gke.clusterName}`: the queries wait for the name."""
    import pulumi

    from gke_gpu import GpuMonitoring
    from tools.offline import run_program

    def program():
        name = pulumi.Output.from_input("gpu-prod").apply(lambda n: n)
        GpuMonitoring(
            "monitoring",
            {
                "dcgm": "managed",
                "project": "p-123456",
                "cluster_name": name,
                "alerts": {"notification_channels": []},
            },
        )

    result = run_program({}, program=program)
    assert result.error is None, result.error
    (policy,) = result.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    assert policy.inputs["displayName"] == "GPU idle on gpu-prod"
    query = policy.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert 'cluster="gpu-prod"' in query
    dashboard = result.one("gcp:monitoring/dashboard:Dashboard")
    assert '"GPUs: gpu-prod"' in dashboard.inputs["dashboardJson"]


def test_a_cluster_name_output_that_would_break_the_queries_is_refused():
    import pulumi

    from gke_gpu import GpuMonitoring
    from tools.offline import run_program

    def program():
        bad = pulumi.Output.from_input('x"} or vector(1) #')
        GpuMonitoring("monitoring", {"dcgm": "managed", "project": "p-123456", "cluster_name": bad})

    result = run_program({}, program=program)
    # The SDK wraps the error of an Output that fails (here in the dashboard URL's inputs); the
    # message is the component's, and nothing carrying the name reached a resource.
    assert result.error is not None
    assert "GpuMonitoring 'monitoring': invalid args" in str(result.error), result.error
    assert "cluster_name: 'x\"} or vector(1) #' is not a Kubernetes label value" in str(result.error)
    assert not [r for r in result.resources if "vector(1)" in str(r.inputs)]
