"""The alert policies' PromQL run by Prometheus' own rule engine (`promtool test rules`).

Each test renders the program, takes the AlertPolicy resources as they would be deployed, turns
their PromQL conditions into a Prometheus rules file (gke_gpu.monitoring.alert_rules.prometheus_rules: the
same query, duration and evaluation interval) and replays series shaped like the real ones:

* dcgm-exporter 4.5.3-4.8.2 as Managed Prometheus stores them with `targetLabels: {metadata: []}`:
  target labels `project_id`, `location`, `cluster`, `namespace` (the exporter's), `job`,
  `instance`; the exporter's `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
  `DCGM_FI_DRIVER_VERSION`, `GPU_I_PROFILE`/`GPU_I_ID` on MIG instances, `err_code`/`err_msg` on
  XID, and `pod`/`container`/`exported_namespace` while a Pod holds the GPU (the exporter's
  `namespace` collides with the target's).
* GKE's `kubernetes_io:node_accelerator_*` as Cloud Monitoring's PromQL exposes them:
  `monitored_resource="k8s_node"`, `project_id`, `location`, `cluster_name`, `node_name`, and the
  metric labels `make`, `model`, `accelerator_id`.

Every scenario also carries another cluster's series, so the cluster filter in each query is
exercised. promtool comes from Debian's `prometheus` package; without it these tests fail.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.monitoring.alert_rules import prometheus_rules
from tests.conftest import L4_POOL, STANDARD_CLUSTER, render, stack_config, stack_render

PROMTOOL_INSTALL_LOCK = Path(tempfile.gettempdir()) / "gke-gpu-promtool-install.lock"
PROMTOOL_INSTALL = "apt-get update && apt-get install -y --no-install-recommends prometheus"
CHANNEL = "projects/test-project/notificationChannels/42"
CLUSTER = STANDARD_CLUSTER["name"]
OTHER_CLUSTER = "someone-elses-cluster"
# The query the XID alert used before: never fires, the exporter's XID series are constant.
OLD_XID_QUERY = (
    f'max by (cluster, Hostname, gpu) (changes(DCGM_FI_DEV_XID_ERRORS{{cluster="{CLUSTER}"}}[5m])) > 0'
)


def _install_promtool() -> str | None:
    """Install Debian's `prometheus` package (it ships promtool) where this process may: as root on a
    machine with apt-get, as CI and a fresh Debian machine are. The README's test command then needs no
    extra step. Elsewhere nothing is installed and the fixture says how to do it."""
    if shutil.which("apt-get") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    # Several test files share this session fixture and `--dist loadfile` sends them to different
    # xdist workers: without the lock two workers run apt-get at once on a fresh machine and the
    # second fails on dpkg's lock. The second waits here, then finds promtool installed.
    with open(PROMTOOL_INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (installed := shutil.which("promtool")) is not None:
            return installed
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-q"],
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"],
        ):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
            if done.returncode != 0:
                pytest.fail(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return shutil.which("promtool")


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool") or _install_promtool()
    if path is None:
        pytest.fail(
            "promtool not found: the alert tests run every alert through Prometheus' rule engine. "
            f"Install it (Debian/Ubuntu, as root): {PROMTOOL_INSTALL}"
        )
    return path


@pytest.fixture(scope="module")
def exporter_rules() -> dict[str, Any]:
    """The rules file of a cluster with the DCGM exporter and default alert settings."""
    return prometheus_rules(alert_policies(dcgm="exporter"))


def alert_policies(**monitoring: Any) -> list[dict[str, Any]]:
    alerts = {"enabled": True, "notificationChannels": [CHANNEL], **monitoring.pop("alerts", {})}
    config = stack_config(
        cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], monitoring={**monitoring, "alerts": alerts}
    )
    return [p.inputs for p in render(config).of_type("gcp:monitoring/alertPolicy:AlertPolicy")]


def run_promtool(
    promtool: str, tmp_path: Path, rules: dict[str, Any], tests: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    (interval,) = {group["interval"] for group in rules["groups"]}
    document = {"rule_files": ["rules.yml"], "evaluation_interval": interval, "tests": tests}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run(
        [promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def assert_passes(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr


def only(rules: dict[str, Any], alert: str, expr: str | None = None) -> dict[str, Any]:
    """The rules file reduced to one alert (its expression optionally swapped)."""
    (group,) = rules["groups"]
    (rule,) = [r for r in group["rules"] if r["alert"] == alert]
    return {"groups": [{**group, "rules": [{**rule, "expr": expr or rule["expr"]}]}]}


def samples(*runs: tuple[float | None, int]) -> str:
    """promtool values: (value, count) runs; None is a missing sample."""
    return " ".join(("_" if value is None else f"{value:g}") for value, count in runs for _ in range(count))


def series(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def dcgm(
    node: str,
    gpu: int,
    *,
    cluster: str = CLUSTER,
    model: str = "NVIDIA L4",
    pod: str | None = None,
    mig: tuple[str, int] | None = None,
    **extra: str,
) -> dict[str, str]:
    """Labels of a dcgm-exporter series after Managed Prometheus (targetLabels metadata: [])."""
    labels = {
        "project_id": "test-project",
        "location": "us-central1",
        "cluster": cluster,
        "namespace": "gpu-monitoring",
        "job": "dcgm-exporter",
        "instance": f"dcgm-exporter-{node[-1]}x7k2:metrics",
        "gpu": str(gpu),
        "UUID": f"GPU-{node}-{gpu}",
        "pci_bus_id": f"00000000:00:0{gpu + 3}.0",
        "device": f"nvidia{gpu}",
        "modelName": model,
        "Hostname": node,
        "DCGM_FI_DRIVER_VERSION": "570.172.08",
    }
    if mig is not None:
        labels |= {"GPU_I_PROFILE": mig[0], "GPU_I_ID": str(mig[1])}
    if pod is not None:
        labels |= {"pod": pod, "container": "main", "exported_namespace": "ml"}
    return labels | extra


def xid(code: int, message: str) -> dict[str, str]:
    return {"err_code": str(code), "err_msg": message}


HEALTHY = xid(0, "No Error")
FELL_OFF_THE_BUS = xid(79, "GPU has fallen off the bus")
DOUBLE_BIT_ECC = xid(48, "Double Bit ECC Error")


def gke_gpu(node: str, accelerator_id: str, *, cluster: str = CLUSTER) -> dict[str, str]:
    """Labels of GKE's node accelerator metrics in Cloud Monitoring's PromQL."""
    return {
        "monitored_resource": "k8s_node",
        "project_id": "test-project",
        "location": "us-central1",
        "cluster_name": cluster,
        "node_name": node,
        "make": "nvidia",
        "model": "nvidia-l4",
        "accelerator_id": accelerator_id,
    }


# -- XID ------------------------------------------------------------------------------------------

# 30 s scrapes. node-a's GPU 0 reports XID 79 from minute 30 (its err_code 0 series stops), while a
# Pod holds it; at minute 60 the Pod is gone, so the same XID series loses its Pod labels. node-b is
# a MIG A100 whose two instances report XID 48 from minute 50. node-a's GPU 1 stays healthy, and
# another cluster's GPU reports XID 79 too.
XID_SERIES = [
    (dcgm("node-a", 0) | HEALTHY, samples((0, 60), (None, 120))),
    (dcgm("node-a", 0, pod="trainer-0") | FELL_OFF_THE_BUS, samples((None, 60), (79, 60), (None, 60))),
    (dcgm("node-a", 0) | FELL_OFF_THE_BUS, samples((None, 120), (79, 60))),
    (dcgm("node-a", 1, pod="server-1") | HEALTHY, samples((0, 180))),
    *(
        (
            dcgm("node-b", 0, model="NVIDIA A100-SXM4-40GB", mig=("1g.5gb", instance)) | DOUBLE_BIT_ECC,
            samples((None, 100), (48, 80)),
        )
        for instance in (1, 2)
    ),
    (dcgm("node-x", 0, cluster=OTHER_CLUSTER) | HEALTHY, samples((0, 60), (None, 120))),
    (dcgm("node-x", 0, cluster=OTHER_CLUSTER) | FELL_OFF_THE_BUS, samples((None, 60), (79, 120))),
]


def xid_alert(node: str, code: dict[str, str]) -> dict[str, Any]:
    return {"exp_labels": {"cluster": CLUSTER, "Hostname": node, "gpu": "0", **code}}


XID_EXPECTED = {
    "29m": [],
    "31m": [xid_alert("node-a", FELL_OFF_THE_BUS)],
    "44m": [xid_alert("node-a", FELL_OFF_THE_BUS)],
    "46m": [],  # resolved on its own, though the exporter still reports 79
    "51m": [xid_alert("node-b", DOUBLE_BIT_ECC)],  # one alert for both MIG instances
    "61m": [xid_alert("node-b", DOUBLE_BIT_ECC)],  # node-a's Pod leaving does not re-raise 79
    "66m": [],
    "89m": [],
}


def xid_test() -> dict[str, Any]:
    return {
        "interval": "30s",
        "input_series": [{"series": series("DCGM_FI_DEV_XID_ERRORS", s), "values": v} for s, v in XID_SERIES],
        "alert_rule_test": [
            {"eval_time": at, "alertname": "GpuXidError", "exp_alerts": alerts}
            for at, alerts in XID_EXPECTED.items()
        ],
    }


def test_xid_alert_fires_for_a_new_xid_and_resolves_on_its_own(
    promtool: str, tmp_path: Path, exporter_rules: dict[str, Any]
) -> None:
    assert_passes(run_promtool(promtool, tmp_path, only(exporter_rules, "GpuXidError"), [xid_test()]))


def test_the_xid_scenario_fails_the_old_changes_query(
    promtool: str, tmp_path: Path, exporter_rules: dict[str, Any]
) -> None:
    """The same scenario against the query the XID alert had before: it never fires."""
    result = run_promtool(
        promtool, tmp_path, only(exporter_rules, "GpuXidError", OLD_XID_QUERY), [xid_test()]
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    # Every moment the alert must fire, it stays silent.
    for at in ("31m", "44m", "51m", "1h1m"):
        assert f"alertname: GpuXidError, time: {at}, " in output, output
    assert output.count("got:[]") == 4, output


# -- Idle GPU, DCGM -------------------------------------------------------------------------------

# Three hours and a quarter of 30 s scrapes (390). Idle threshold 5 %, for 120 minutes (the defaults).
DCGM_SAMPLES = 390
IDLE_SERIES = [
    # Idle from the start.
    (dcgm("node-a", 0), samples((0, DCGM_SAMPLES))),
    # Busy, held by a Pod.
    (dcgm("node-a", 1, pod="server-1"), samples((85, DCGM_SAMPLES))),
    # Scaled up from zero: idle 20 minutes while the image is pulled, then busy.
    (dcgm("node-b", 0), samples((0, 40), (90, DCGM_SAMPLES - 40))),
    # Busy for an hour, then idle.
    (dcgm("node-b", 1, pod="batch-7"), samples((60, 120))),
    (dcgm("node-b", 1), samples((None, 120), (0, DCGM_SAMPLES - 120))),
    # Time-shared by two Pods at 2 %: one series per Pod, one GPU, one alert.
    (dcgm("node-c", 0, pod="notebook-1"), samples((2, DCGM_SAMPLES))),
    (dcgm("node-c", 0, pod="notebook-2"), samples((2, DCGM_SAMPLES))),
    # Another cluster's idle GPU.
    (dcgm("node-x", 0, cluster=OTHER_CLUSTER), samples((0, DCGM_SAMPLES))),
]


def idle_dcgm_alert(node: str, gpu: int) -> dict[str, Any]:
    return {"exp_labels": {"cluster": CLUSTER, "Hostname": node, "gpu": str(gpu), "modelName": "NVIDIA L4"}}


def test_idle_gpu_alert_on_dcgm_utilization(
    promtool: str, tmp_path: Path, exporter_rules: dict[str, Any]
) -> None:
    (group,) = exporter_rules["groups"]
    assert {r["alert"]: r["for"] for r in group["rules"]} == {"GpuIdle": "7200s", "GpuXidError": "0s"}
    expected = {
        "1h58m": [],  # idle, but not yet for 120 minutes
        "2h02m": [idle_dcgm_alert("node-a", 0), idle_dcgm_alert("node-c", 0)],
        "3h05m": [idle_dcgm_alert("node-a", 0), idle_dcgm_alert("node-c", 0)],
        "3h12m": [idle_dcgm_alert("node-a", 0), idle_dcgm_alert("node-b", 1), idle_dcgm_alert("node-c", 0)],
    }
    test = {
        "interval": "30s",
        "input_series": [{"series": series("DCGM_FI_DEV_GPU_UTIL", s), "values": v} for s, v in IDLE_SERIES],
        "alert_rule_test": [
            {"eval_time": at, "alertname": "GpuIdle", "exp_alerts": alerts} for at, alerts in expected.items()
        ],
    }
    assert_passes(run_promtool(promtool, tmp_path, only(exporter_rules, "GpuIdle"), [test]))


def test_idle_gpu_alert_on_mig_instances_uses_their_engine_activity(
    promtool: str, tmp_path: Path, exporter_rules: dict[str, Any]
) -> None:
    """A MIG GPU: DCGM_FI_DEV_GPU_UTIL reads 0 on every instance (NVIDIA/dcgm-exporter#216), busy or
    not, so it must not raise the alert; each instance is judged by DCGM_FI_PROF_GR_ENGINE_ACTIVE
    (a ratio) and an idle one alerts on its own, named by GPU_I_ID."""
    a100 = "NVIDIA A100-SXM4-40GB"

    def instance(number: int) -> dict[str, str]:
        return dcgm("node-m", 0, model=a100, mig=("3g.20gb", number))

    input_series = [
        {"series": series("DCGM_FI_DEV_GPU_UTIL", instance(n)), "values": samples((0, DCGM_SAMPLES))}
        for n in (1, 2)
    ]
    input_series += [
        # Instance 1 busy, instance 2 idle.
        {
            "series": series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", instance(1)),
            "values": samples((0.7, DCGM_SAMPLES)),
        },
        {
            "series": series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", instance(2)),
            "values": samples((0.01, DCGM_SAMPLES)),
        },
        # A whole GPU's engine activity never counts twice: its GPU_UTIL decides.
        {
            "series": series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm("node-a", 1)),
            "values": samples((0, DCGM_SAMPLES)),
        },
        {"series": series("DCGM_FI_DEV_GPU_UTIL", dcgm("node-a", 1)), "values": samples((80, DCGM_SAMPLES))},
    ]
    idle_instance = {
        "exp_labels": {
            "cluster": CLUSTER,
            "Hostname": "node-m",
            "gpu": "0",
            "GPU_I_ID": "2",
            "modelName": a100,
        }
    }
    test = {
        "interval": "30s",
        "input_series": input_series,
        "alert_rule_test": [
            {"eval_time": "1h58m", "alertname": "GpuIdle", "exp_alerts": []},
            {"eval_time": "2h02m", "alertname": "GpuIdle", "exp_alerts": [idle_instance]},
        ],
    }
    assert_passes(run_promtool(promtool, tmp_path, only(exporter_rules, "GpuIdle"), [test]))


# -- Idle GPU, GKE's duty cycle (dcgm: none) ------------------------------------------------------


def test_idle_gpu_alert_on_gkes_duty_cycle(promtool: str, tmp_path: Path) -> None:
    rules = prometheus_rules(
        alert_policies(dcgm="none", alerts={"idleGpuMinutes": 60, "idleGpuUtilizationPercent": 2})
    )
    minutes = 80  # GKE samples every 60 s
    memory = samples((24e9, minutes))
    gpus = {
        # No duty-cycle sample at all: idle.
        "aaaa": ("node-a", memory, None),
        # Busy.
        "bbbb": ("node-a", memory, samples((50, minutes))),
        # Under the 2 % threshold.
        "cccc": ("node-b", memory, samples((1, minutes))),
    }
    input_series = []
    for accelerator, (node, total, duty) in gpus.items():
        labels = gke_gpu(node, f"GPU-{accelerator}")
        input_series.append(
            {"series": series("kubernetes_io:node_accelerator_memory_total", labels), "values": total}
        )
        if duty is not None:
            input_series.append(
                {"series": series("kubernetes_io:node_accelerator_duty_cycle", labels), "values": duty}
            )
    other = gke_gpu("node-x", "GPU-xxxx", cluster=OTHER_CLUSTER)
    input_series.append(
        {"series": series("kubernetes_io:node_accelerator_memory_total", other), "values": memory}
    )

    def alert(node: str, accelerator: str) -> dict[str, Any]:
        return {
            "exp_labels": {"cluster_name": CLUSTER, "node_name": node, "accelerator_id": f"GPU-{accelerator}"}
        }

    expected = {"58m": [], "62m": [alert("node-a", "aaaa"), alert("node-b", "cccc")]}
    test = {
        "interval": "1m",
        "input_series": input_series,
        "alert_rule_test": [
            {"eval_time": at, "alertname": "GpuIdle", "exp_alerts": alerts} for at, alerts in expected.items()
        ],
    }
    assert_passes(run_promtool(promtool, tmp_path, rules, [test]))


# -- The rules files themselves -------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["prod"])
def test_stack_alerts_are_valid_prometheus_rules(promtool: str, tmp_path: Path, stack: str) -> None:
    policies = [p.inputs for p in stack_render(stack).of_type("gcp:monitoring/alertPolicy:AlertPolicy")]
    rules = prometheus_rules(policies)
    assert [r["alert"] for g in rules["groups"] for r in g["rules"]] == ["GpuIdle"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        [promtool, "check", "rules", "rules.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_come_from_the_policies_conditions() -> None:
    policies = alert_policies(dcgm="exporter")
    rules = prometheus_rules(policies)
    conditions = [c["conditionPrometheusQueryLanguage"] for p in policies for c in p["conditions"]]
    (group,) = rules["groups"]
    assert group["name"] == "gke-gpu" and group["interval"] == "60s"
    assert [(r["alert"], r["expr"], r["for"]) for r in group["rules"]] == [
        (c["alertRule"], c["query"], c["duration"]) for c in conditions
    ]


def test_conditions_with_different_intervals_cannot_share_a_group() -> None:
    policies: Sequence[dict[str, Any]] = alert_policies(dcgm="exporter")
    policies[1]["conditions"][0]["conditionPrometheusQueryLanguage"]["evaluationInterval"] = "30s"
    with pytest.raises(ValueError, match="different evaluation intervals"):
        prometheus_rules(policies)
