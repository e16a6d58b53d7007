"""The dashboard's model-server section: what vLLM reports of each service, and the GPU duty cycle
of the serving Pods.

Every chart is one PromQL query over Managed Service for Prometheus, pinned to the cluster and
grouped per service. The series and labels are the ones vLLM 0.33.0 exports
(`vllm/v1/metrics/loggers.py`: `model_name` = the served model name, `engine` = the engine index),
as the PodMonitoring of each InferenceService has Managed Prometheus store them: with the target's
`cluster`, `namespace` (the service's own, `serve-<name>`), `pod` and `container`. Counters carry
prometheus_client's `_total` suffix, histograms their `_bucket` series. `tests/
test_serving_dashboard.py` runs every query through `promtool` over series shaped that way.

The GPU duty cycle comes from DCGM (`DCGM_FI_DEV_GPU_UTIL`), which names the Pod holding a GPU
(dcgm-exporter's Kubernetes mode adds `pod`, `namespace`, `container`). Managed Prometheus' scrape
always sets the target's own `namespace` on a PodMonitoring, so the workload's becomes
`exported_namespace` (our exporter); a ClusterPodMonitoring without the namespace target label keeps
it as `namespace` (which of the two GKE's managed DCGM gives is not documented: the query takes
either). MIG partitions report no utilization, so a service on MIG has no GPU line.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

# A service's namespace is `serve-<name>` (serving/model.py `service_namespace`; the batch teams
# reserve the prefix): the GPU chart keeps the DCGM series of Pods in those namespaces. Duplicated
# here because a domain does not import another; tests/test_serving_dashboard.py checks they agree.
SERVING_NAMESPACE_PREFIX = "serve-"
# One line per service: its namespace and the model name it serves (`--served-model-name`).
SERVICE_KEYS = ("namespace", "model_name")
# Rates and percentiles over the last 5 minutes: at vLLM's 15 s scrape, 20 samples a point, enough
# finished requests for a p99 to mean something on a lightly used service.
WINDOW = "5m"
# vLLM's finish reasons (vllm/v1/engine/__init__.py FINISH_REASON_STRINGS: stop, length, abort,
# error, repetition): these two are a request that did not complete.
FAILED_REASONS = ("abort", "error")


class ServingChart(NamedTuple):
    key: str  # what tests and docs call the chart
    title: str
    query: str  # PromQL
    unit: str  # a Cloud Monitoring unit (dashboard.valid_unit)
    axis_label: str


def _by(keys: tuple[str, ...]) -> str:
    return ", ".join(keys)


def _labelled(label: str, parts: dict[str, str]) -> str:
    """Several aggregations on one chart, told apart by a label of their own (`label_replace` with
    an empty source sets it to a constant)."""
    return " or ".join(f'label_replace({q}, "{label}", "{value}", "", "")' for value, q in parts.items())


def serving_charts(cluster: str, *, dcgm: bool) -> list[ServingChart]:
    """The section's charts for one cluster; `dcgm` adds the serving Pods' GPU duty cycle."""
    on = f'cluster="{cluster}"'
    keys = _by(SERVICE_KEYS)
    failed = "|".join(FAILED_REASONS)
    ttft = f"sum by ({keys}, le) (rate(vllm:time_to_first_token_seconds_bucket{{{on}}}[{WINDOW}]))"
    charts = [
        ServingChart(
            "completed",
            "Requests completed per second",
            f"sum by ({keys}) "
            f'(rate(vllm:request_success_total{{{on},finished_reason!~"{failed}"}}[{WINDOW}]))',
            "1/s",
            "requests/s",
        ),
        ServingChart(
            "failed",
            "Requests aborted or failed per second",
            f"sum by ({keys}, finished_reason) "
            f'(rate(vllm:request_success_total{{{on},finished_reason=~"{failed}"}}[{WINDOW}]))',
            "1/s",
            "requests/s",
        ),
        ServingChart(
            "queue",
            "Requests waiting and running",
            _labelled(
                "requests",
                {
                    "waiting": f"sum by ({keys}) (vllm:num_requests_waiting{{{on}}})",
                    "running": f"sum by ({keys}) (vllm:num_requests_running{{{on}}})",
                },
            ),
            "1",
            "requests",
        ),
        ServingChart(
            "ttft",
            "Time to first token, p50 and p99 (s)",
            _labelled(
                "percentile",
                {"p50": f"histogram_quantile(0.5, {ttft})", "p99": f"histogram_quantile(0.99, {ttft})"},
            ),
            "s",
            "seconds",
        ),
        ServingChart(
            "tokens",
            "Tokens per second, output and prompt",
            _labelled(
                "tokens",
                {
                    "output": f"sum by ({keys}) (rate(vllm:generation_tokens_total{{{on}}}[{WINDOW}]))",
                    "prompt": f"sum by ({keys}) (rate(vllm:prompt_tokens_total{{{on}}}[{WINDOW}]))",
                },
            ),
            "1/s",
            "tokens/s",
        ),
        # The fullest replica: one full cache makes that replica's requests wait, whatever the others do.
        ServingChart(
            "kv-cache",
            "KV-cache use, fullest replica (%)",
            f"max by ({keys}) (vllm:kv_cache_usage_perc{{{on}}})",
            "10^2.%",
            "%",
        ),
    ]
    if dcgm:
        serving = f'"{SERVING_NAMESPACE_PREFIX}.+"'
        charts.append(
            ServingChart(
                "gpu",
                "GPU duty cycle of the serving Pods, DCGM (%)",
                "avg by (namespace) ("
                f"label_replace(DCGM_FI_DEV_GPU_UTIL{{{on},exported_namespace=~{serving}}}, "
                '"namespace", "$1", "exported_namespace", "(.+)") '
                f"or DCGM_FI_DEV_GPU_UTIL{{{on},namespace=~{serving}}})",
                "%",
                "%",
            )
        )
    return charts


class PromQlChart(Protocol):
    """A chart of one PromQL query (the model-server section's, a fleet's)."""

    @property
    def title(self) -> str: ...
    @property
    def query(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def axis_label(self) -> str: ...


def promql_widget(chart: PromQlChart) -> dict[str, Any]:
    """An XY chart of one PromQL query; each series is named by its labels."""
    return {
        "title": chart.title,
        "xyChart": {
            "dataSets": [
                {
                    "timeSeriesQuery": {"prometheusQuery": chart.query, "unitOverride": chart.unit},
                    "plotType": "LINE",
                    "targetAxis": "Y1",
                }
            ],
            "yAxis": {"scale": "LINEAR", "label": chart.axis_label},
            "chartOptions": {"mode": "COLOR"},
        },
    }


SECTION_NOTE = (
    "Model servers (gke-gpu:serving): vLLM's own metrics, one line per service (its namespace "
    f"`{SERVING_NAMESPACE_PREFIX}<name>` and model name), rates and percentiles over the last {WINDOW}. "
)
DCGM_NOTE = "The serving Pods' GPU duty cycle comes from DCGM (none on MIG partitions)."
NO_DCGM_NOTE = "Without DCGM there is no per-service GPU line: the node charts above show the pool."
