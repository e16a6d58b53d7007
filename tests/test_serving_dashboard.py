"""The dashboard's model-server section: which charts a stack with services gets, and every chart's
PromQL run by Prometheus' own engine (`promtool test rules`, `promql_expr_test`) over series shaped
as vLLM 0.33.0 exports them and Managed Prometheus stores them.

vLLM 0.33.0 (`vllm/v1/metrics/loggers.py` of the PyPI sdist): gauges `vllm:num_requests_waiting`,
`vllm:num_requests_running`, `vllm:kv_cache_usage_perc` (0..1); counters `vllm:request_success`
(label `finished_reason`, one series per reason from the start), `vllm:prompt_tokens`,
`vllm:generation_tokens`, exposed with prometheus_client's `_total`; the histogram
`vllm:time_to_first_token_seconds` with the buckets of `vllm/v1/metrics/buckets.py`. Every series
carries `model_name` (the served model name) and `engine`. Managed Prometheus adds the
PodMonitoring's target labels (`project_id`, `location`, `cluster`, `namespace`, `job`, `instance`,
and by default `pod`, `container`). Each scenario also carries another cluster's series.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.monitoring.dashboard import valid_unit
from gke_gpu.monitoring.dashboard_serving import SERVING_NAMESPACE_PREFIX
from gke_gpu.serving.model import service_namespace
from tests.conftest import STANDARD_CLUSTER, render, stack_config, stack_render
from tests.test_alert_rules import CHANNEL, OTHER_CLUSTER, assert_passes, samples, series
from tests.test_alert_rules import promtool as promtool  # the session fixture
from tests.test_monitoring import dashboard_document, parse_with_google_types
from tests.test_serving_alert import vllm

CLUSTER = STANDARD_CLUSTER["name"]
L4 = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 3, "driverVersion": "LATEST"}
CHAT = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen", "replicas": {"min": 2, "max": 2}}
EMBED = {"name": "embed", "pool": "l4", "model": "gs://models-bucket/e5"}
SECTION = "Model servers"
# The section's charts, in order; the last only with DCGM.
TITLES = [
    "Requests completed per second",
    "Requests aborted or failed per second",
    "Requests waiting and running",
    "Time to first token, p50 and p99 (s)",
    "Tokens per second, output and prompt",
    "KV-cache use, fullest replica (%)",
    "GPU duty cycle of the serving Pods, DCGM (%)",
]
# vllm/v1/metrics/buckets.py TIME_TO_FIRST_TOKEN_BUCKETS (0.33.0), and +Inf.
TTFT_BUCKETS = (
    *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0),
    *(2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
)
# vllm/v1/engine/__init__.py FINISH_REASON_STRINGS (0.33.0).
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
STEPS = 80  # 15 s scrapes for 20 minutes
EVAL = "10m"


def serving_tiles(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The tiles after the section header, in order."""
    tiles = sorted(document["mosaicLayout"]["tiles"], key=lambda t: (t["yPos"], t["xPos"]))
    titles = [t["widget"]["title"] for t in tiles]
    return tiles[titles.index(SECTION) + 1 :] if SECTION in titles else []


def queries(document: dict[str, Any]) -> dict[str, str]:
    """Chart title -> its PromQL."""
    charts = {tile["widget"]["title"]: tile["widget"]["xyChart"] for tile in serving_tiles(document)}
    return {title: xy["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"] for title, xy in charts.items()}


def serving_dashboard(**monitoring: Any) -> dict[str, Any]:
    config = stack_config(
        cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT, EMBED], monitoring=monitoring
    )
    return dashboard_document(render(config))


# -- Which charts ------------------------------------------------------------------------------------


def test_a_stack_with_services_gets_the_section_and_googles_types_take_it() -> None:
    document = dashboard_document(stack_render("serve"))
    assert [t["widget"]["title"] for t in serving_tiles(document)] == TITLES
    parsed = parse_with_google_types(document)
    assert parsed["tiles"] == len(document["mosaicLayout"]["tiles"])
    for tile in serving_tiles(document):
        (data,) = tile["widget"]["xyChart"]["dataSets"]
        query = data["timeSeriesQuery"]
        assert 'cluster="gpu-serve"' in query["prometheusQuery"], "pinned to this cluster"
        assert valid_unit(query["unitOverride"]), query["unitOverride"]
        assert tile["xPos"] + tile["width"] <= document["mosaicLayout"]["columns"]
    text = document["mosaicLayout"]["tiles"][0]["widget"]["text"]["content"]
    assert "`serve-<name>`" in text, "the namespace in code spans: markdown would take <name> for a tag"


def test_no_section_without_services() -> None:
    for stack in ("dev", "prod"):
        document = dashboard_document(stack_render(stack))
        assert serving_tiles(document) == []
        assert "vllm:" not in json.dumps(document)


def test_without_dcgm_there_is_no_gpu_chart_and_the_text_says_why() -> None:
    document = serving_dashboard(dcgm="none")
    assert [t["widget"]["title"] for t in serving_tiles(document)] == TITLES[:-1]
    assert "Without DCGM there is no per-service GPU line" in json.dumps(document)


def test_the_section_needs_no_alerts_and_the_alert_needs_no_dashboard() -> None:
    assert [t["widget"]["title"] for t in serving_tiles(serving_dashboard())] == TITLES
    config = stack_config(
        cluster=STANDARD_CLUSTER,
        gpuPools=[L4],
        serving=[CHAT],
        monitoring={
            "dashboard": False,
            "alerts": {"enabled": True, "notificationChannels": [CHANNEL]},
        },
    )
    result = render(config)
    assert result.of_type("gcp:monitoring/dashboard:Dashboard") == []
    names = [p.inputs["displayName"] for p in result.of_type("gcp:monitoring/alertPolicy:AlertPolicy")]
    assert any(n.startswith("Model server backlog") for n in names), names


def test_services_with_neither_dashboard_nor_alerts_declare_no_monitoring_at_all() -> None:
    # The stack passes `serving` only where it has an effect (GpuMonitoring refuses it otherwise).
    config = stack_config(
        cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT], monitoring={"dashboard": False}
    )
    result = render(config)
    assert result.of_type("gke-gpu:index:GpuMonitoring") == []


def test_the_namespace_prefix_is_the_services_own() -> None:
    assert service_namespace("chat") == f"{SERVING_NAMESPACE_PREFIX}chat"


# -- The queries, evaluated -------------------------------------------------------------------------


def counter(per_scrape: float) -> str:
    """A counter growing by `per_scrape` every 15 s: `per_scrape / 15` a second."""
    return f"0+{per_scrape:g}x{STEPS}"


def histogram(metric: str, labels: dict[str, str], per_scrape: dict[float, float]) -> list[dict[str, str]]:
    """The `_bucket` series of a histogram whose observations each scrape are `per_scrape`
    (upper bound -> observations in that bucket alone); cumulative as Prometheus exposes them."""
    inputs, total = [], 0.0
    for bound in (*TTFT_BUCKETS, float("inf")):
        total += per_scrape.get(bound, 0.0)
        le = "+Inf" if bound == float("inf") else f"{bound:g}"
        inputs.append({"series": series(f"{metric}_bucket", {**labels, "le": le}), "values": counter(total)})
    return inputs


def finished(pod: str, per_scrape: dict[str, float], **kw: str) -> list[dict[str, str]]:
    """vLLM creates a series per finish reason at start: the reasons not given stay at 0."""
    return [
        {
            "series": series("vllm:request_success_total", vllm(pod, **kw, finished_reason=reason)),
            "values": counter(per_scrape.get(reason, 0)),
        }
        for reason in FINISH_REASONS
    ]


def gauge(metric: str, labels: dict[str, str], value: float) -> dict[str, str]:
    return {"series": series(metric, labels), "values": samples((value, STEPS + 1))}


def counting(metric: str, labels: dict[str, str], per_scrape: float) -> dict[str, str]:
    return {"series": series(metric, labels), "values": counter(per_scrape)}


# chat runs two replicas, embed one; another cluster's chat is busier than both. Rates in the
# comments are per second (a counter's step / 15 s).
VLLM_SERIES: list[dict[str, str]] = [
    # stop 2/s + length 1/s on a, stop 1/s on b; abort 0.2/s on a, error 0.2/s on b.
    *finished("chat-a", {"stop": 30, "length": 15, "abort": 3}),
    *finished("chat-b", {"stop": 15, "error": 3}),
    *finished("embed-a", {"stop": 15}, model="embed"),
    *finished("chat-x", {"stop": 150, "abort": 150}, cluster=OTHER_CLUSTER),
    gauge("vllm:num_requests_waiting", vllm("chat-a"), 7),
    gauge("vllm:num_requests_waiting", vllm("chat-b"), 3),
    gauge("vllm:num_requests_waiting", vllm("embed-a", model="embed"), 0),
    gauge("vllm:num_requests_waiting", vllm("chat-x", cluster=OTHER_CLUSTER), 99),
    gauge("vllm:num_requests_running", vllm("chat-a"), 20),
    gauge("vllm:num_requests_running", vllm("chat-b"), 16),
    gauge("vllm:num_requests_running", vllm("embed-a", model="embed"), 4),
    gauge("vllm:num_requests_running", vllm("chat-x", cluster=OTHER_CLUSTER), 99),
    gauge("vllm:kv_cache_usage_perc", vllm("chat-a"), 0.5),
    gauge("vllm:kv_cache_usage_perc", vllm("chat-b"), 0.875),
    gauge("vllm:kv_cache_usage_perc", vllm("embed-a", model="embed"), 0.25),
    gauge("vllm:kv_cache_usage_perc", vllm("chat-x", cluster=OTHER_CLUSTER), 1),
    # Output 100/s + 50/s, prompt 200/s + 200/s on chat; embed generates nothing, reads 10/s.
    counting("vllm:generation_tokens_total", vllm("chat-a"), 1500),
    counting("vllm:generation_tokens_total", vllm("chat-b"), 750),
    counting("vllm:generation_tokens_total", vllm("embed-a", model="embed"), 0),
    counting("vllm:generation_tokens_total", vllm("chat-x", cluster=OTHER_CLUSTER), 9),
    counting("vllm:prompt_tokens_total", vllm("chat-a"), 3000),
    counting("vllm:prompt_tokens_total", vllm("chat-b"), 3000),
    counting("vllm:prompt_tokens_total", vllm("embed-a", model="embed"), 150),
    counting("vllm:prompt_tokens_total", vllm("chat-x", cluster=OTHER_CLUSTER), 9),
    # chat: half its first tokens within (0.1, 0.25] s, half within (0.25, 0.5] s, on both replicas;
    # embed: all within (0.5, 0.75] s; the other cluster's are slow.
    *histogram("vllm:time_to_first_token_seconds", vllm("chat-a"), {0.25: 5, 0.5: 5}),
    *histogram("vllm:time_to_first_token_seconds", vllm("chat-b"), {0.25: 5, 0.5: 5}),
    *histogram("vllm:time_to_first_token_seconds", vllm("embed-a", model="embed"), {0.75: 4}),
    *histogram("vllm:time_to_first_token_seconds", vllm("chat-x", cluster=OTHER_CLUSTER), {2560.0: 4}),
]


def chat(**extra: str) -> dict[str, str]:
    return {"namespace": "serve-chat", "model_name": "chat", **extra}


def embed(**extra: str) -> dict[str, str]:
    return {"namespace": "serve-embed", "model_name": "embed", **extra}


EXPECTED: dict[str, list[tuple[dict[str, str], float]]] = {
    "Requests completed per second": [(chat(), 4), (embed(), 1)],
    "Requests aborted or failed per second": [
        (chat(finished_reason="abort"), 0.2),
        (chat(finished_reason="error"), 0.2),
        (embed(finished_reason="abort"), 0),
        (embed(finished_reason="error"), 0),
    ],
    "Requests waiting and running": [
        (chat(requests="waiting"), 10),
        (chat(requests="running"), 36),
        (embed(requests="waiting"), 0),
        (embed(requests="running"), 4),
    ],
    # histogram_quantile interpolates within a bucket: chat's p50 is the 0.25 s bound, its p99
    # 0.25 + 0.25 x 0.98; embed's 0.5 + 0.25 x 0.5 and 0.5 + 0.25 x 0.99.
    "Time to first token, p50 and p99 (s)": [
        (chat(percentile="p50"), 0.25),
        (chat(percentile="p99"), 0.495),
        (embed(percentile="p50"), 0.625),
        (embed(percentile="p99"), 0.7475),
    ],
    "Tokens per second, output and prompt": [
        (chat(tokens="output"), 150),
        (chat(tokens="prompt"), 400),
        (embed(tokens="output"), 0),
        (embed(tokens="prompt"), 10),
    ],
    "KV-cache use, fullest replica (%)": [(chat(), 0.875), (embed(), 0.25)],
}


def expr_test(query: str, expected: list[tuple[dict[str, str], float]]) -> dict[str, Any]:
    return {
        "expr": query,
        "eval_time": EVAL,
        "exp_samples": [
            {"labels": "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "value": value}
            for labels, value in expected
        ],
    }


def run_expr_tests(
    promtool: str, tmp_path: Path, inputs: list[dict[str, str]], tests: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    """promtool's PromQL tests: each query evaluated at its time over the input series."""
    document = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{"interval": "15s", "input_series": inputs, "promql_expr_test": tests}],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run(
        [promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def test_every_vllm_chart_over_vllm_shaped_series(promtool: str, tmp_path: Path) -> None:
    charts = queries(serving_dashboard())
    tests = [expr_test(charts[title], expected) for title, expected in EXPECTED.items()]
    assert_passes(run_expr_tests(promtool, tmp_path, VLLM_SERIES, tests))


def test_a_wrong_metric_name_fails_the_chart_test(promtool: str, tmp_path: Path) -> None:
    # What the test above would catch: vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc (0.9).
    query = queries(serving_dashboard())["KV-cache use, fullest replica (%)"]
    stale = query.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    expected = EXPECTED["KV-cache use, fullest replica (%)"]
    result = run_expr_tests(promtool, tmp_path, VLLM_SERIES, [expr_test(stale, expected)])
    assert result.returncode != 0


def dcgm(node: str, value: float, *, cluster: str = CLUSTER, **workload: str) -> dict[str, str]:
    """DCGM_FI_DEV_GPU_UTIL of one GPU (dcgm-exporter 4.5.3-4.8.2 labels), `workload` being the Pod
    labels the exporter adds while a Pod holds the GPU, as the scrape leaves them."""
    labels = {
        "project_id": "test-project",
        "location": "us-central1",
        "cluster": cluster,
        "job": "dcgm-exporter",
        "instance": f"dcgm-exporter-{node}:metrics",
        "gpu": "0",
        "UUID": f"GPU-{node}-0",
        "device": "nvidia0",
        "modelName": "NVIDIA L4",
        "Hostname": node,
        **workload,
    }
    return gauge("DCGM_FI_DEV_GPU_UTIL", labels, value)


# Our exporter's PodMonitoring: the target's namespace stays `namespace`, the Pod's becomes
# `exported_namespace`. A ClusterPodMonitoring without the namespace target label leaves the Pod's
# as `namespace` (GKE's managed DCGM: which one is UNVERIFIED, the chart takes either).
EXPORTER = {"namespace": "gpu-monitoring"}


@pytest.mark.parametrize(
    "workload",
    [
        pytest.param(lambda ns, pod: {**EXPORTER, "exported_namespace": ns, "pod": pod}, id="exported"),
        pytest.param(lambda ns, pod: {"namespace": ns, "pod": pod}, id="namespace"),
    ],
)
def test_the_gpu_chart_keeps_the_serving_pods_gpus(promtool: str, tmp_path: Path, workload: Any) -> None:
    query = queries(serving_dashboard())["GPU duty cycle of the serving Pods, DCGM (%)"]
    inputs = [
        dcgm("node-a", 80, **workload("serve-chat", "chat-a"), container="vllm"),
        dcgm("node-b", 60, **workload("serve-chat", "chat-b"), container="vllm"),
        dcgm("node-c", 30, **workload("serve-embed", "embed-a"), container="vllm"),
        # A batch job's GPU, an idle GPU (no Pod labels), another cluster's server.
        dcgm("node-d", 100, **workload("gpu-jobs", "train-0"), container="trainer"),
        dcgm("node-e", 0, **EXPORTER),
        dcgm("node-x", 5, cluster=OTHER_CLUSTER, **workload("serve-chat", "chat-x"), container="vllm"),
    ]
    expected = [({"namespace": "serve-chat"}, 70), ({"namespace": "serve-embed"}, 30)]
    assert_passes(run_expr_tests(promtool, tmp_path, inputs, [expr_test(query, expected)]))


def test_gpu_monitoring_in_ones_own_program_takes_serving() -> None:
    from gke_gpu import GpuMonitoring
    from tools.offline import run_program

    def program() -> None:
        GpuMonitoring(
            "monitoring",
            {"dcgm": "managed", "project": "test-project", "cluster_name": "gpu", "serving": True},
        )

    result = run_program({}, program=program)
    assert result.error is None, result.error
    document = json.loads(result.one("gcp:monitoring/dashboard:Dashboard").inputs["dashboardJson"])
    assert [t["widget"]["title"] for t in serving_tiles(document)] == TITLES
