"""The GPU dashboard, built as data: a Cloud Monitoring `projects.dashboards` document.

Two sources, each in its own section:

* GKE's built-in accelerator metrics (`kubernetes.io/node/accelerator/*`,
  `kubernetes.io/container/accelerator/*`): always there on GPU nodes, no DCGM needed.
* DCGM metrics (`prometheus.googleapis.com/DCGM_FI_*`), from GKE's managed DCGM or the
  self-deployed exporter through Managed Service for Prometheus.

With model servers, a third section charts each service (components/monitoring/dashboard_serving.py).

Every query is pinned to this cluster; the dashboard filters (cluster, node pool, GPU model) narrow
it further in the console. The document is checked against Google's own dashboard types in the
tests, so a misspelt field fails there rather than in the API.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..core.common import NODEPOOL_LABEL
from ..core.images import DCGM_HOSTNAME_LABEL
from .dashboard_serving import DCGM_NOTE, NO_DCGM_NOTE, SECTION_NOTE, promql_widget, serving_charts

COLUMNS = 48
HALF = COLUMNS // 2
CHART_HEIGHT = 16

# Cloud Monitoring's unit grammar (google.api.MetricDescriptor.unit): a UCUM subset whose only basic
# units are bit, By, s, min, h, d and 1, with decimal and binary prefixes, `%`, `{annotations}`,
# `.` and `/`; the notes add numeric factors (`10^2.%`: a 0..1 ratio shown as %, `MiBy/10ms`,
# `k{page_views}/d`). Watts and degrees Celsius are not in it: those charts carry their unit in the
# title instead, as Google's own DCGM dashboard does.
_PREFIX = "(?:Ki|Mi|Gi|Ti|Pi|k|M|G|T|P|E|Z|Y|m|u|n|p|f|a|z|y)"
_ANNOTATION = r"(?:\{[!-z|~]+\})"
_FACTOR = r"(?:10\^-?\d+|\d+)"
_COMPONENT = (
    rf"(?:{_FACTOR}?{_PREFIX}?(?:(?:bit|By|s|min|h|d|1){_ANNOTATION}?|{_ANNOTATION})"
    rf"|%{_ANNOTATION}?|{_FACTOR})"
)
_UNIT = re.compile(rf"{_COMPONENT}(?:\.{_COMPONENT})*(?:/{_COMPONENT})*")


def valid_unit(unit: str) -> bool:
    """Whether `unit` follows Cloud Monitoring's unit grammar."""
    return _UNIT.fullmatch(unit) is not None


@dataclass(frozen=True)
class Chart:
    title: str
    metric: str
    resource: Literal["k8s_node", "k8s_container", "prometheus_target"]
    group_by: tuple[str, ...]
    aligner: str = "ALIGN_MEAN"
    reducer: str = "REDUCE_MEAN"
    # A Cloud Monitoring unit (unitOverride); empty keeps the metric's own.
    unit: str = ""
    # What the y axis says, for people.
    axis_label: str = ""
    plot: str = "LINE"

    def __post_init__(self) -> None:
        if self.unit and not valid_unit(self.unit):
            raise ValueError(f"chart {self.title!r}: {self.unit!r} is not a Cloud Monitoring unit")


def _filter(chart: Chart, cluster: str) -> str:
    cluster_label = "cluster" if chart.resource == "prometheus_target" else "cluster_name"
    return (
        f'metric.type="{chart.metric}" resource.type="{chart.resource}" '
        f'resource.label."{cluster_label}"="{cluster}"'
    )


def _query(chart: Chart, cluster: str) -> dict[str, Any]:
    query: dict[str, Any] = {
        "timeSeriesFilter": {
            "filter": _filter(chart, cluster),
            "aggregation": {
                "alignmentPeriod": "60s",
                "perSeriesAligner": chart.aligner,
                "crossSeriesReducer": chart.reducer,
                "groupByFields": list(chart.group_by),
            },
        }
    }
    if chart.unit:
        query["unitOverride"] = chart.unit
    return query


def _xy(chart: Chart, cluster: str, *extra: Chart, title: str | None = None) -> dict[str, Any]:
    return {
        "title": title or chart.title,
        "xyChart": {
            "dataSets": [
                {
                    "timeSeriesQuery": _query(c, cluster),
                    "plotType": c.plot,
                    "targetAxis": "Y1",
                    "legendTemplate": c.title if extra else "",
                }
                for c in (chart, *extra)
            ],
            "yAxis": {"scale": "LINEAR", "label": chart.axis_label},
            "chartOptions": {"mode": "COLOR"},
        },
    }


def _scorecard(chart: Chart, cluster: str) -> dict[str, Any]:
    return {
        "title": chart.title,
        "scorecard": {
            "timeSeriesQuery": _query(chart, cluster),
            "sparkChartView": {"sparkChartType": "SPARK_LINE"},
        },
    }


def _node(metric: str) -> str:
    return f"kubernetes.io/node/accelerator/{metric}"


def _dcgm(field: str) -> str:
    return f"prometheus.googleapis.com/{field}/gauge"


NODE_KEYS = ('resource.label."node_name"', 'metric.label."model"', 'metric.label."accelerator_id"')
# One series per GPU, and per MIG instance: the exporter reports each instance as its own series
# (GPU_I_ID; `gpu` stays the parent's index), so averaging a MIG GPU's instances by `gpu` would show
# a seventh of a full 1g.5gb instance's framebuffer. The node label is renamed upstream (core/images.py).
DCGM_KEYS = (
    f'metric.label."{DCGM_HOSTNAME_LABEL}"',
    'metric.label."gpu"',
    'metric.label."GPU_I_ID"',
    'metric.label."modelName"',
)

REQUESTED = Chart(
    "GPUs requested by containers",
    "kubernetes.io/container/accelerator/request",
    "k8s_container",
    (),
    reducer="REDUCE_SUM",
)
PHYSICAL = Chart(
    "Physical GPUs reporting",
    _node("memory_total"),
    "k8s_node",
    (),
    reducer="REDUCE_COUNT",
)
BUILT_IN = [
    Chart("GPU duty cycle by node (%)", _node("duty_cycle"), "k8s_node", NODE_KEYS, unit="%", axis_label="%"),
    Chart(
        "GPU memory used by node",
        _node("memory_used"),
        "k8s_node",
        NODE_KEYS,
        unit="By",
        axis_label="bytes",
    ),
    Chart(
        "GPU duty cycle by accelerator model (%)",
        _node("duty_cycle"),
        "k8s_node",
        ('metric.label."model"',),
        unit="%",
        axis_label="%",
    ),
    Chart(
        "GPU duty cycle by node pool (%)",
        _node("duty_cycle"),
        "k8s_node",
        (f'metadata.user_labels."{NODEPOOL_LABEL}"',),
        unit="%",
        axis_label="%",
    ),
]
DCGM = [
    Chart(
        "GPU utilization (%)",
        _dcgm("DCGM_FI_DEV_GPU_UTIL"),
        "prometheus_target",
        DCGM_KEYS,
        unit="%",
        axis_label="%",
    ),
    Chart(
        "GPU utilization by accelerator model (%)",
        _dcgm("DCGM_FI_DEV_GPU_UTIL"),
        "prometheus_target",
        ('metric.label."modelName"',),
        unit="%",
        axis_label="%",
    ),
    Chart(
        "Framebuffer memory used (MiB)",
        _dcgm("DCGM_FI_DEV_FB_USED"),
        "prometheus_target",
        DCGM_KEYS,
        unit="MiBy",
        axis_label="MiB",
    ),
    Chart(
        "Framebuffer memory free (MiB)",
        _dcgm("DCGM_FI_DEV_FB_FREE"),
        "prometheus_target",
        DCGM_KEYS,
        unit="MiBy",
        axis_label="MiB",
    ),
    # The profiling fields are 0..1 ratios: `10^2.%` shows them as percentages.
    Chart(
        "SM active (%)",
        _dcgm("DCGM_FI_PROF_SM_ACTIVE"),
        "prometheus_target",
        DCGM_KEYS,
        unit="10^2.%",
        axis_label="%",
    ),
    Chart(
        "Tensor core active (%)",
        _dcgm("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
        "prometheus_target",
        DCGM_KEYS,
        unit="10^2.%",
        axis_label="%",
    ),
    # No unitOverride: Cloud Monitoring's unit grammar has no watt or degree Celsius.
    Chart(
        "GPU temperature (°C)", _dcgm("DCGM_FI_DEV_GPU_TEMP"), "prometheus_target", DCGM_KEYS, axis_label="°C"
    ),
    Chart("Power draw (W)", _dcgm("DCGM_FI_DEV_POWER_USAGE"), "prometheus_target", DCGM_KEYS, axis_label="W"),
]


def gpu_dashboard(*, cluster: str, display_name: str, dcgm: bool, serving: bool = False) -> dict[str, Any]:
    """The dashboard document for one cluster; `dcgm` adds the DCGM section, `serving` the model
    servers' (without it the document is the same as before there were servers)."""
    tiles: list[dict[str, Any]] = []
    y = 0

    def add(widget: dict[str, Any], *, width: int, height: int) -> None:
        """Place a tile left to right; a tile that does not fit starts the next row."""
        nonlocal y
        row_used = sum(t["width"] for t in tiles if t["yPos"] == y)
        if row_used + width > COLUMNS:
            y += max(t["height"] for t in tiles if t["yPos"] == y)
            row_used = 0
        tiles.append({"xPos": row_used, "yPos": y, "width": width, "height": height, "widget": widget})

    def section(title: str, subtitle: str) -> None:
        """A full-width header: it always opens a row of its own."""
        add(
            {"title": title, "sectionHeader": {"subtitle": subtitle, "dividerBelow": True}},
            width=COLUMNS,
            height=4,
        )

    dcgm_note = (
        "DCGM panels come from GKE's managed DCGM or the DCGM exporter. Profiling fields (SM, tensor "
        "activity) need data-center GPUs; MIG partitions have no utilization metric."
        if dcgm
        else "DCGM is off for this stack (monitoring.dcgm: none): only GKE's built-in accelerator "
        "metrics show."
    )
    add(
        {
            "title": f"GPUs of cluster {cluster}",
            "text": {
                "content": (
                    f"GPU nodes of GKE cluster **{cluster}**, managed by the gke-gpu Pulumi program. "
                    "Built-in accelerator metrics need nothing installed; on time-shared and MPS nodes only "
                    "node-level metrics exist (so GPU requests there are not counted). "
                    + dcgm_note
                    + (" " + SECTION_NOTE + (DCGM_NOTE if dcgm else NO_DCGM_NOTE) if serving else "")
                    + " Use the filters above to narrow to a node pool or GPU model."
                ),
                "format": "MARKDOWN",
            },
        },
        width=COLUMNS,
        height=5,
    )
    add(_scorecard(REQUESTED, cluster), width=HALF // 2, height=8)
    add(_scorecard(PHYSICAL, cluster), width=HALF // 2, height=8)
    average_duty = replace(BUILT_IN[0], title="Average GPU duty cycle (%)", group_by=())
    add(_scorecard(average_duty, cluster), width=HALF // 2, height=8)
    if dcgm:
        average_util = replace(DCGM[0], title="Average GPU utilization, DCGM (%)", group_by=())
        add(_scorecard(average_util, cluster), width=HALF // 2, height=8)

    section("GKE accelerator metrics", "Built-in, no DCGM needed")
    add(
        _xy(REQUESTED, cluster, PHYSICAL, title="GPU requests vs physical GPUs"),
        width=HALF,
        height=CHART_HEIGHT,
    )
    for chart in BUILT_IN:
        add(_xy(chart, cluster), width=HALF, height=CHART_HEIGHT)
    if dcgm:
        section("DCGM", "NVIDIA Data Center GPU Manager")
        for chart in DCGM:
            add(_xy(chart, cluster), width=HALF, height=CHART_HEIGHT)
    if serving:
        section("Model servers", "vLLM, one line per service")
        for serving_chart in serving_charts(cluster, dcgm=dcgm):
            add(promql_widget(serving_chart), width=HALF, height=CHART_HEIGHT)

    return {
        "displayName": display_name,
        "dashboardFilters": [
            {"filterType": "RESOURCE_LABEL", "labelKey": "cluster_name", "stringValue": cluster},
            {"filterType": "RESOURCE_LABEL", "labelKey": "cluster", "stringValue": cluster},
            # Narrows the GKE accelerator charts; DCGM series have no node-pool label.
            {"filterType": "USER_METADATA_LABEL", "labelKey": NODEPOOL_LABEL},
            # GPU model: `model` on GKE's accelerator metrics, `modelName` on DCGM's.
            {"filterType": "METRIC_LABEL", "labelKey": "model"},
            {"filterType": "METRIC_LABEL", "labelKey": "modelName"},
        ],
        "mosaicLayout": {"columns": COLUMNS, "tiles": tiles},
        "labels": {"gke-gpu": ""},
    }
