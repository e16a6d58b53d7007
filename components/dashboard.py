"""The GPU dashboard, built as data: a Cloud Monitoring `projects.dashboards` document.

Two sources, each in its own section:

* GKE's built-in accelerator metrics (`kubernetes.io/node/accelerator/*`,
  `kubernetes.io/container/accelerator/*`): always there on GPU nodes, no DCGM needed.
* DCGM metrics (`prometheus.googleapis.com/DCGM_FI_*`), from GKE's managed DCGM or the
  self-deployed exporter through Managed Service for Prometheus.

Every query is pinned to this cluster; the dashboard filters (cluster, node pool, GPU model) narrow
it further in the console. The document is checked against Google's own dashboard types in the
tests, so a misspelt field fails there rather than in the API.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

COLUMNS = 48
HALF = COLUMNS // 2
CHART_HEIGHT = 16
NODEPOOL_USER_LABEL = "cloud.google.com/gke-nodepool"


@dataclass(frozen=True)
class Chart:
    title: str
    metric: str
    resource: Literal["k8s_node", "k8s_container", "prometheus_target"]
    group_by: tuple[str, ...]
    aligner: str = "ALIGN_MEAN"
    reducer: str = "REDUCE_MEAN"
    unit: str = ""
    plot: str = "LINE"


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
            "yAxis": {"scale": "LINEAR", "label": chart.unit},
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
DCGM_KEYS = ('metric.label."Hostname"', 'metric.label."gpu"', 'metric.label."modelName"')

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
    Chart("GPU duty cycle by node (%)", _node("duty_cycle"), "k8s_node", NODE_KEYS, unit="%"),
    Chart("GPU memory used by node", _node("memory_used"), "k8s_node", NODE_KEYS, unit="By"),
    Chart(
        "GPU duty cycle by accelerator model (%)",
        _node("duty_cycle"),
        "k8s_node",
        ('metric.label."model"',),
        unit="%",
    ),
    Chart(
        "GPU duty cycle by node pool (%)",
        _node("duty_cycle"),
        "k8s_node",
        (f'metadata.user_labels."{NODEPOOL_USER_LABEL}"',),
        unit="%",
    ),
]
DCGM = [
    Chart("GPU utilization (%)", _dcgm("DCGM_FI_DEV_GPU_UTIL"), "prometheus_target", DCGM_KEYS, unit="%"),
    Chart(
        "GPU utilization by accelerator model (%)",
        _dcgm("DCGM_FI_DEV_GPU_UTIL"),
        "prometheus_target",
        ('metric.label."modelName"',),
        unit="%",
    ),
    Chart(
        "Framebuffer memory used (MiB)",
        _dcgm("DCGM_FI_DEV_FB_USED"),
        "prometheus_target",
        DCGM_KEYS,
        unit="MiBy",
    ),
    Chart(
        "Framebuffer memory free (MiB)",
        _dcgm("DCGM_FI_DEV_FB_FREE"),
        "prometheus_target",
        DCGM_KEYS,
        unit="MiBy",
    ),
    Chart("SM active (ratio)", _dcgm("DCGM_FI_PROF_SM_ACTIVE"), "prometheus_target", DCGM_KEYS),
    Chart(
        "Tensor core active (ratio)", _dcgm("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), "prometheus_target", DCGM_KEYS
    ),
    Chart("GPU temperature (°C)", _dcgm("DCGM_FI_DEV_GPU_TEMP"), "prometheus_target", DCGM_KEYS, unit="Cel"),
    Chart("Power draw (W)", _dcgm("DCGM_FI_DEV_POWER_USAGE"), "prometheus_target", DCGM_KEYS, unit="W"),
]


def gpu_dashboard(*, cluster: str, display_name: str, dcgm: bool) -> dict[str, Any]:
    """The dashboard document for one cluster; `dcgm` adds the DCGM section."""
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

    return {
        "displayName": display_name,
        "dashboardFilters": [
            {"filterType": "RESOURCE_LABEL", "labelKey": "cluster_name", "stringValue": cluster},
            {"filterType": "RESOURCE_LABEL", "labelKey": "cluster", "stringValue": cluster},
            # Narrows the GKE accelerator charts; DCGM series have no node-pool label.
            {"filterType": "USER_METADATA_LABEL", "labelKey": NODEPOOL_USER_LABEL},
            # GPU model: `model` on GKE's accelerator metrics, `modelName` on DCGM's.
            {"filterType": "METRIC_LABEL", "labelKey": "model"},
            {"filterType": "METRIC_LABEL", "labelKey": "modelName"},
        ],
        "mosaicLayout": {"columns": COLUMNS, "tiles": tiles},
        "labels": {"gke-gpu": ""},
    }
