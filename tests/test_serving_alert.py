"""The model servers' queue-backlog alert, run by Prometheus' rule engine (`promtool test rules`) over
series shaped as vLLM 0.33.0 exports them (vllm/v1/metrics/loggers.py: `vllm:num_requests_waiting`, a
gauge labelled `model_name` and `engine`) after Managed Prometheus adds the target's labels."""

from pathlib import Path
from typing import Any

from gke_gpu.monitoring.alert_rules import prometheus_rules
from tests.conftest import STANDARD_CLUSTER, config_error, render, stack_config
from tests.test_alert_rules import (
    CHANNEL,
    CLUSTER,
    OTHER_CLUSTER,
    assert_passes,
    only,
    run_promtool,
    samples,
    series,
)
from tests.test_alert_rules import promtool as promtool  # the session fixture

L4 = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2, "driverVersion": "LATEST"}
CHAT = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen", "replicas": {"min": 2, "max": 2}}


def serving_policies(**alerts: Any) -> list[dict[str, Any]]:
    config = stack_config(
        cluster={**STANDARD_CLUSTER, "name": CLUSTER},
        gpuPools=[L4],
        serving=[CHAT],
        monitoring={"alerts": {"enabled": True, "notificationChannels": [CHANNEL], **alerts}},
    )
    return [p.inputs for p in render(config).of_type("gcp:monitoring/alertPolicy:AlertPolicy")]


def vllm(pod: str, *, model: str = "chat", cluster: str = CLUSTER, **extra: str) -> dict[str, str]:
    """Labels of a vLLM series after Managed Prometheus (the InferenceService's PodMonitoring)."""
    return {
        "project_id": "test-project",
        "location": "us-central1",
        "cluster": cluster,
        "namespace": f"serve-{model}",
        "job": model,
        "instance": f"{pod}:8000",
        "pod": pod,
        "container": "vllm",
        "model_name": model,
        "engine": "0",
        **extra,
    }


# 15 s scrapes for 45 minutes (180). chat's two replicas: idle 10 minutes, then 30 and 20 requests
# waiting (25 per replica) for 20 minutes, then 2 and 0. embed waits 5 all along (under 10); another
# cluster's server is backed up throughout.
SERIES = [
    (vllm("chat-7d9f-a"), samples((0, 40), (30, 80), (2, 60))),
    (vllm("chat-7d9f-b"), samples((0, 40), (20, 80), (0, 60))),
    (vllm("embed-5c2a-a", model="embed"), samples((5, 180))),
    (vllm("chat-1111-a", cluster=OTHER_CLUSTER), samples((50, 180))),
]


def test_the_backlog_alert_fires_on_a_sustained_queue_and_resolves(promtool: str, tmp_path: Path) -> None:
    rules = prometheus_rules(serving_policies())
    (group,) = rules["groups"]
    assert {r["alert"]: r["for"] for r in group["rules"]}["ServingQueueBacklog"] == "600s"
    chat = {"exp_labels": {"cluster": CLUSTER, "namespace": "serve-chat", "model_name": "chat"}}
    # The 5-minute mean crosses 10 per replica at about 12m; the alert holds 10 minutes more; the
    # queue drains at 30m and the mean falls under 10 at about 33m.
    expected = {"11m": [], "21m": [], "23m": [chat], "30m": [chat], "36m": []}
    test = {
        "interval": "15s",
        "input_series": [{"series": series("vllm:num_requests_waiting", s), "values": v} for s, v in SERIES],
        "alert_rule_test": [
            {"eval_time": at, "alertname": "ServingQueueBacklog", "exp_alerts": alerts}
            for at, alerts in expected.items()
        ],
    }
    assert_passes(run_promtool(promtool, tmp_path, only(rules, "ServingQueueBacklog"), [test]))


def test_the_threshold_is_the_stack_files() -> None:
    (policy,) = [
        p for p in serving_policies(servingQueueBacklog=40) if p["displayName"].startswith("Model server")
    ]
    (condition,) = policy["conditions"]
    assert condition["conditionPrometheusQueryLanguage"]["query"].endswith("> 40")


def test_no_backlog_alert_without_servers_and_no_threshold_either() -> None:
    config = stack_config(
        cluster=STANDARD_CLUSTER,
        gpuPools=[L4],
        monitoring={"alerts": {"enabled": True, "notificationChannels": [CHANNEL]}},
    )
    names = [
        p.inputs["displayName"] for p in render(config).of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    ]
    assert not any(n.startswith("Model server") for n in names)
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4],
            "monitoring": {
                "alerts": {"enabled": True, "notificationChannels": [CHANNEL], "servingQueueBacklog": 5}
            },
        }
    )
    assert "gke-gpu:monitoring.alerts.servingQueueBacklog: only allowed with gke-gpu:serving" in message
