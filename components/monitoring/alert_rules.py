"""The GPU alert rules, written once.

`alert_rules` gives each rule's PromQL, duration and words; `gpu_monitoring.py` turns them
into Cloud Monitoring alert policies (PromQL conditions over Managed Service for Prometheus), and
`prometheus_rules` turns those policies' conditions back into a Prometheus rules file, so the tests
can run the very queries and durations the policies carry through `promtool test rules`.

Labels the queries rely on:

* DCGM exporter series (`prometheus_target`): `cluster` (added by Managed Prometheus), and the
  exporter's own `gpu`, `modelName`, `err_code`/`err_msg` (XID) and the node name label
  (`images.DCGM_HOSTNAME_LABEL`, renamed upstream: see components/core/images.py).
* GKE's accelerator metrics (`k8s_node`): `cluster_name`, `node_name`, `accelerator_id`, with
  `monitored_resource="k8s_node"` picking the node-level series.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple, Protocol

from ..core.images import DCGM_HOSTNAME_LABEL

# The Prometheus rule group (and Cloud Monitoring's `ruleGroup`) every GPU alert belongs to.
RULE_GROUP = "gke-gpu"
# How often Cloud Monitoring evaluates each condition.
EVALUATION_INTERVAL = "60s"
# The idle condition is measured over a short window and must hold for the whole configured time
# (the policy's duration): a node that just scaled up from zero and is still pulling an image has a
# few idle samples, which would otherwise already average under the threshold.
IDLE_WINDOW = "10m"
# How long an XID alert stays open after a GPU first reports a new XID code.
XID_WINDOW = "15m"

DCGM_GPU_KEYS = ("cluster", DCGM_HOSTNAME_LABEL, "gpu")
# dcgm-exporter's label for a MIG instance (GPU instance ID); absent on a whole GPU's series.
MIG_INSTANCE_LABEL = "GPU_I_ID"
# vLLM's series carry `model_name` and `engine` (vllm/v1/metrics/loggers.py, 0.33.0); Managed
# Prometheus adds the target's `cluster`, `namespace` and `pod`.
SERVING_KEYS = ("cluster", "namespace", "model_name")
BACKLOG_WINDOW = "5m"
BACKLOG_FOR_S = 600
GKE_GPU_KEYS = ("cluster_name", "node_name", "accelerator_id")


class AlertThresholds(Protocol):
    """What the rules read of the alert settings (the stack's AlertsConfig, GpuMonitoring's args)."""

    @property
    def idle_gpu_minutes(self) -> int: ...
    @property
    def idle_gpu_utilization_percent(self) -> float: ...
    @property
    def xid_errors(self) -> bool: ...
    @property
    def serving_queue_backlog(self) -> int: ...


class AlertRule(NamedTuple):
    """One alert policy's rule (built with keywords)."""

    key: str  # suffix of the AlertPolicy resource name
    alert: str  # the Prometheus alert name (Cloud Monitoring's `alertRule`)
    display_name: str
    condition: str
    query: str
    duration: str  # Cloud Monitoring's form, seconds: "7200s"
    severity: Literal["WARNING", "CRITICAL"]
    documentation: str


def _by(keys: Iterable[str]) -> str:
    return ", ".join(keys)


def idle_gpu_query(cluster: str, dcgm: str, threshold_percent: float) -> str:
    """PromQL that returns one series per GPU averaging under the threshold over IDLE_WINDOW."""
    threshold = f"{threshold_percent:g}"
    if dcgm != "none":
        # A whole GPU: DCGM's utilization, 0 when idle. A MIG instance (a series with GPU_I_ID):
        # DCGM_FI_DEV_GPU_UTIL is not supported for MIG instances (NVIDIA/dcgm-exporter#216, #430:
        # reported as 0 or not at all), so its series are left out and each instance is judged by its
        # graphics-engine activity, a ratio that NVIDIA's maintainers name as the MIG utilization signal
        # (#430: "DCGM_FI_PROF_GR_ENGINE_ACTIVE ... is reported for MIG devices"). One alert per idle
        # instance, keyed by its GPU_I_ID.
        whole = (
            f"avg by ({_by((*DCGM_GPU_KEYS, 'modelName'))}) (avg_over_time("
            f'DCGM_FI_DEV_GPU_UTIL{{cluster="{cluster}",{MIG_INSTANCE_LABEL}=""}}[{IDLE_WINDOW}])) '
            f"< {threshold}"
        )
        partitions = (
            f"avg by ({_by((*DCGM_GPU_KEYS, MIG_INSTANCE_LABEL, 'modelName'))}) (avg_over_time("
            f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{cluster="{cluster}",{MIG_INSTANCE_LABEL}!=""}}[{IDLE_WINDOW}])) '
            f"* 100 < {threshold}"
        )
        return f"({whole}) or ({partitions})"
    # GKE's duty cycle may have no sample at all for an idle GPU, so start from the GPUs that exist
    # (their memory_total series) and drop those that were busy.
    selector = f'{{monitored_resource="k8s_node",cluster_name="{cluster}"}}'
    keys = _by(GKE_GPU_KEYS)
    busy = (
        f"avg by ({keys}) (avg_over_time("
        f"kubernetes_io:node_accelerator_duty_cycle{selector}[{IDLE_WINDOW}])) >= {threshold}"
    )
    return (
        f"max by ({keys}) (kubernetes_io:node_accelerator_memory_total{selector}) unless on ({keys}) ({busy})"
    )


def xid_query(cluster: str) -> str:
    """PromQL that returns one series per GPU and XID code while that code is new.

    Since dcgm-exporter PR #309 the XID code is a label: a GPU without error reports
    `{err_code="0"} 0`, and an XID 79 starts a new series `{err_code="79"} 79` that stays constant
    (so `changes()` over it is always 0). The alert holds while a non-zero code's series exists now
    but did not XID_WINDOW ago. Grouping drops the Pod labels the exporter adds while a Pod holds the
    GPU, so a workload coming or going does not re-raise an old code.
    """
    keys = _by((*DCGM_GPU_KEYS, "err_code", "err_msg"))
    selector = f'DCGM_FI_DEV_XID_ERRORS{{cluster="{cluster}",err_code=~"[1-9][0-9]*"}}'
    return f"max by ({keys}) ({selector}) unless max by ({keys}) ({selector} offset {XID_WINDOW})"


def backlog_query(cluster: str, threshold: int) -> str:
    """PromQL: one series per model server (all its replicas) whose mean queue over BACKLOG_WINDOW is
    above the threshold per replica."""
    return (
        f"avg by ({_by(SERVING_KEYS)}) (avg_over_time("
        f'vllm:num_requests_waiting{{cluster="{cluster}"}}[{BACKLOG_WINDOW}])) > {threshold}'
    )


def alert_rules(
    cluster: str, dcgm: str, alerts: AlertThresholds, *, serving: bool = False
) -> list[AlertRule]:
    """The GPU alerts for one cluster: idle GPUs always, XID errors where DCGM exports them, and a
    queue backlog where model servers run."""
    minutes = alerts.idle_gpu_minutes
    threshold = f"{alerts.idle_gpu_utilization_percent:g}"
    source = "DCGM GPU utilization" if dcgm != "none" else "GKE accelerator duty cycle"
    rules = [
        AlertRule(
            key="idle-gpu",
            alert="GpuIdle",
            display_name=f"GPU idle on {cluster}",
            condition=f"GPU under {threshold}% for {minutes} min ({source})",
            query=idle_gpu_query(cluster, dcgm, alerts.idle_gpu_utilization_percent),
            duration=f"{minutes * 60}s",
            severity="WARNING",
            documentation=(
                f"A GPU of cluster `{cluster}` has stayed under {threshold}% utilization for {minutes} "
                "minutes while its node is up: it is billed but idle. Check what holds it "
                "(`kubectl get pods -A -o wide` on that node), scale the workload down, or lower the "
                "pool's minNodes so the autoscaler can remove the node."
            ),
        )
    ]
    if alerts.xid_errors and dcgm == "exporter":
        rules.append(
            AlertRule(
                key="xid-errors",
                alert="GpuXidError",
                display_name=f"GPU XID error on {cluster}",
                condition="DCGM reports a new XID error",
                query=xid_query(cluster),
                duration="0s",
                severity="CRITICAL",
                documentation=(
                    f"A GPU of cluster `{cluster}` raised an NVIDIA XID error: the `err_code` and "
                    "`err_msg` labels name it (see NVIDIA's XID catalog). Codes such as 48, 63, 64, 74, "
                    "79, 94, 95 point at hardware or NVLink faults: cordon and drain the node and let "
                    "GKE repair or replace it. Application errors (13, 31, 43, 45) fire it too. The "
                    f"incident closes by itself {XID_WINDOW} after the code first appeared; the "
                    "exporter keeps reporting a GPU's last code, so the same code again does not "
                    "re-open it, a different code does."
                ),
            )
        )
    if serving:
        backlog = alerts.serving_queue_backlog
        rules.append(
            AlertRule(
                key="serving-backlog",
                alert="ServingQueueBacklog",
                display_name=f"Model server backlog on {cluster}",
                condition=f"over {backlog} requests waiting per replica for {BACKLOG_FOR_S // 60} min",
                query=backlog_query(cluster, backlog),
                duration=f"{BACKLOG_FOR_S}s",
                severity="WARNING",
                documentation=(
                    f"A model server of cluster `{cluster}` (the `namespace` and `model_name` labels name "
                    f"it) has had more than {backlog} requests waiting per replica, on average, for "
                    f"{BACKLOG_FOR_S // 60} minutes (vLLM's `vllm:num_requests_waiting`): its replicas "
                    "cannot keep up, and time to first token grows with the queue. Add replicas (and the "
                    "pool's maxNodes), or a smaller or quantized model; check `vllm:kv_cache_usage_perc`: "
                    "a full KV cache makes requests wait too."
                ),
            )
        )
    return rules


def prometheus_rules(policies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A Prometheus rules file from AlertPolicy inputs as deployed (camelCase keys).

    Each PromQL condition becomes one alerting rule: its `alertRule` name, `query` and `duration`,
    grouped by `ruleGroup` and evaluated every `evaluationInterval`.
    """
    groups: dict[str, dict[str, Any]] = {}
    for policy in policies:
        for condition in policy["conditions"]:
            promql = condition.get("conditionPrometheusQueryLanguage")
            if promql is None:
                continue
            name = promql.get("ruleGroup") or RULE_GROUP
            group = groups.setdefault(
                name, {"name": name, "interval": promql.get("evaluationInterval", "60s"), "rules": []}
            )
            if group["interval"] != promql.get("evaluationInterval", "60s"):
                raise ValueError(f"rule group {name}: conditions with different evaluation intervals")
            rule: dict[str, Any] = {
                "alert": promql.get("alertRule") or condition["displayName"],
                "expr": promql["query"],
                "for": promql.get("duration", "0s"),
            }
            if promql.get("labels"):
                rule["labels"] = dict(promql["labels"])
            group["rules"].append(rule)
    return {"groups": list(groups.values())}
