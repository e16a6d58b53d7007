"""GPU monitoring: the DCGM exporter when self-managed, a Cloud Monitoring dashboard, alert policies."""

import json
from collections.abc import Sequence
from functools import partial
from operator import itemgetter
from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
from pulumi_gcp import monitoring
from pydantic import Field

from ..core.arg_types import LabelValue, ProjectId, enum_values
from ..core.common import LABEL_VALUE_PATTERN, KeyNames, Problem, Problems, cut
from ..core.component import NO_ARGS, CheckedArgs, GkeGpuComponent
from ..core.validation import ArgsModel, Deferrable, InvalidArgsError, pick
from .alert_rules import EVALUATION_INTERVAL, RULE_GROUP, AlertRule, AlertThresholds, alert_rules
from .dashboard import gpu_dashboard
from .dcgm_exporter import DcgmExporter
from .dcgm_exporter_args import DcgmExporterSettings, DcgmExporterSpec, exporter_problems
from .fleet import check_fleet, fleet_dashboard, worker_unreachable_rule
from .model import AlertPolicyConfig, DcgmSource
from .rules import check_notification_channels, check_xid_errors


class AlertPolicies(TypedDict):
    """The GPU alert policies: an idle GPU always, XID errors with the exporter."""

    notification_channels: NotRequired[list[str]]
    """Channels every policy notifies: projects/<project>/notificationChannels/<id> (at most 16).
    Defaults to none (incidents show in the console only)."""
    idle_gpu_minutes: NotRequired[int]
    """How long a GPU must stay under the threshold before the idle alert fires (5 to 1440).
    Defaults to 120."""
    idle_gpu_utilization_percent: NotRequired[float]
    """The idle threshold, percent of GPU utilization (0 to 100). Defaults to 5."""
    xid_errors: NotRequired[bool]
    """An alert on any new XID error (dcgm exporter only: GKE's managed DCGM exports no XID field).
    Defaults to true with the exporter."""
    serving_queue_backlog: NotRequired[int]
    """With `serving`: requests waiting per model-server replica (mean over 5 min) above which, for
    10 min, the backlog alert fires. Defaults to 10."""


class FleetWorker(TypedDict):
    """A worker of the MultiKueue fleet this cluster manages."""

    name: str
    """Its MultiKueueCluster's name on the manager (the alert and the dispatch chart read it)."""
    cluster_name: NotRequired[str]
    """Its GKE cluster's name (its Kueue's series carry it). Defaults to `name`."""


class GpuMonitoringArgs(TypedDict):
    """The DCGM source, the dashboard and the alert policies of one cluster."""

    dcgm: DcgmSource
    """Where the DCGM metrics come from: managed, exporter or none."""
    project: NotRequired[pulumi.Input[str]]
    """The GCP project of the dashboard and alert policies. Defaults to the provider's project."""
    cluster_name: NotRequired[pulumi.Input[str]]
    """The cluster's name: every chart and alert query filters on it. Required with a dashboard or
    alerts."""
    exporter: NotRequired[DcgmExporterSettings]
    """The self-managed DCGM exporter. Required with dcgm exporter, and only then."""
    dashboard: NotRequired[bool]
    """A Cloud Monitoring dashboard of the cluster's GPUs. Defaults to true."""
    alerts: NotRequired[AlertPolicies]
    """Alert policies. Defaults to none."""
    serving: NotRequired[bool]
    """Model servers (InferenceService) run on the cluster: the dashboard gets a section per service
    (requests, queue, time to first token, tokens per second, KV-cache use, the serving Pods' GPU duty
    cycle), and `alerts` a queue-backlog policy on vLLM's waiting requests. Needs a dashboard or
    alerts. Defaults to false."""
    fleet_workers: NotRequired[list[FleetWorker]]
    """The cluster is a MultiKueue manager over these workers (1 to 16): a second dashboard, of the
    fleet (per worker its workloads admitted and pending and the GPUs they use; the workloads each
    runs and whether the manager reaches each), and with `alerts` a policy that fires when a worker
    has not been reachable for 10 minutes (monitoring/fleet.py). Both read kube-state-metrics'
    (MultiKueueStateMetrics in every cluster; without the manager's the alert fires for every
    worker): a fleet stack declares them. Needs a dashboard or alerts. Defaults to none."""


# A cluster name as the queries filter on it (a non-empty label value).
ClusterLabel = Annotated[LabelValue, Field(min_length=1)]


class _FleetWorkerSpec(ArgsModel):
    name: str
    cluster_name: str | None = None


class _GpuMonitoringSpec(ArgsModel):
    dcgm: enum_values(DcgmSource)  # type: ignore[valid-type]
    project: Deferrable[ProjectId] | None = None
    # It reaches PromQL and Monitoring filters: checked here when known, or when the Output resolves.
    cluster_name: Deferrable[ClusterLabel] | None = None
    exporter: DcgmExporterSpec | None = None
    dashboard: bool = True
    # The stack file's own model for the thresholds, read with snake_case names (one set of types).
    alerts: AlertPolicyConfig | None = None
    serving: bool = False
    fleet_workers: Annotated[list[_FleetWorkerSpec], Field(min_length=1, max_length=16)] | None = None

    def fleet(self) -> tuple[list[str], dict[str, str]]:
        """The workers' MultiKueueCluster names, and the GKE cluster name of each that has its own."""
        workers = self.fleet_workers or []
        return [w.name for w in workers], {w.name: w.cluster_name for w in workers if w.cluster_name}


def _monitoring_rules(spec: _GpuMonitoringSpec) -> list[str]:
    problems = Problems()
    if spec.dcgm == "exporter" and spec.exporter is None:
        problems.add("exporter", "required with dcgm exporter")
    if spec.dcgm != "exporter" and spec.exporter is not None:
        problems.add("exporter", f"only allowed with dcgm exporter (dcgm is {spec.dcgm})")
    if (spec.dashboard or spec.alerts is not None) and spec.cluster_name is None:
        problems.add("cluster_name", "required with a dashboard or alerts: they filter on the cluster's name")
    if spec.serving and not spec.dashboard and spec.alerts is None:
        problems.add(
            "serving",
            "true has no effect without a dashboard or alerts (dashboard is false, alerts unset): "
            "remove it or turn one of them on",
        )
    if spec.fleet_workers is not None:
        if not spec.dashboard and spec.alerts is None:
            problems.add(
                "fleet_workers",
                "has no effect without a dashboard or alerts (dashboard is false, alerts unset): remove "
                "it or turn one of them on",
            )
        manager = spec.cluster_name if isinstance(spec.cluster_name, str) else None
        keys = ("cluster_name", "fleet_workers[{i}].name", "fleet_workers[{i}].cluster_name")
        problems.items += check_fleet(manager, *spec.fleet(), keys=keys)
    alerts = spec.alerts
    if alerts is not None:
        names = KeyNames("alerts", camel=False)
        check_xid_errors(names, problems, dcgm=spec.dcgm, alerts=alerts, dcgm_key="dcgm")
        check_notification_channels(names, problems, alerts=alerts)
    items = problems.items
    if spec.exporter is not None:
        items += exporter_problems(spec.exporter, "exporter.")
    return items


class GpuMonitoring(GkeGpuComponent[_GpuMonitoringSpec]):
    """DCGM collection (GKE-managed DCGM is switched on in the cluster itself; this component adds
    the self-managed exporter), the GPU dashboard, and alerts for idle GPUs and XID errors.

    Alerts: an idle GPU node (utilization under a threshold for a long window: money burning) and,
    where DCGM exports it (the exporter; GKE's managed set has no XID field), any XID error. Both
    notify the configured channels (a stack file must name at least one; with none, the policies
    still fire in Cloud Monitoring but notify nobody).
    """

    dashboard_url: pulumi.Output[str] | None
    """The dashboard in the Cloud Console; none without a dashboard."""
    fleet_dashboard_url: pulumi.Output[str] | None
    """The fleet's dashboard in the Cloud Console; none without `fleet_workers` and a dashboard."""
    alert_policy_names: pulumi.Output[list[str]]
    """The alert policies' resource names (projects/<project>/alertPolicies/<id>)."""

    _args_model = _GpuMonitoringSpec
    _args_rules = staticmethod(_monitoring_rules)
    _args_by_name = True

    def __init__(
        self,
        name: str,
        /,
        args: GpuMonitoringArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.exporter: DcgmExporter | None = None
        if spec.dcgm == "exporter":
            # Checked with this component's args (the model, and exporter_problems in its rules): the
            # exporter does not check them again.
            exporter = CheckedArgs(args["exporter"], spec.exporter)
            self.exporter = DcgmExporter(f"{name}-dcgm", exporter, opts=child)  # type: ignore[arg-type]

        self.dashboard: monitoring.Dashboard | None = None
        self.dashboard_url = None
        project = pick(spec.project, args.get("project"))
        # The cluster's name may be another resource's Output: the queries are built once it is known.
        fleet_workers, fleet_clusters = spec.fleet()
        cluster = pulumi.Output.from_input(pick(spec.cluster_name, args.get("cluster_name")) or "").apply(
            partial(
                _checked_cluster_name,
                name,
                spec.dashboard or spec.alerts is not None,
                fleet=(fleet_workers, fleet_clusters) if spec.fleet_workers else None,
            )
        )
        if spec.dashboard:
            with_dcgm, with_serving = spec.dcgm != "none", spec.serving
            self.dashboard = monitoring.Dashboard(
                f"{name}-dashboard",
                project=project,
                dashboard_json=cluster.apply(
                    lambda c: json.dumps(
                        gpu_dashboard(
                            cluster=c, display_name=f"GPUs: {c}", dcgm=with_dcgm, serving=with_serving
                        ),
                        sort_keys=True,
                    )
                ),
                opts=child,
            )
            self.dashboard_url = _console_url(self.dashboard, project)

        self.fleet_dashboard: monitoring.Dashboard | None = None
        self.fleet_dashboard_url = None
        if spec.dashboard and spec.fleet_workers:
            # A dashboard of its own: the GPU dashboard's filters pin its charts to this cluster, and
            # the fleet's charts read the workers' series.
            self.fleet_dashboard = monitoring.Dashboard(
                f"{name}-fleet-dashboard",
                project=project,
                dashboard_json=cluster.apply(
                    lambda c: json.dumps(fleet_dashboard(c, fleet_workers, fleet_clusters), sort_keys=True)
                ),
                opts=child,
            )
            self.fleet_dashboard_url = _console_url(self.fleet_dashboard, project)

        # Resources, not outputs (the schema would reference the gcp package): the program reads
        # their display names.
        self.alert_policies: list[monitoring.AlertPolicy] = []
        if spec.alerts is not None:
            alerts, dcgm = spec.alerts, spec.dcgm
            channels = alerts.notification_channels
            # Which policies exist does not depend on the name; their queries and words do.
            serving = spec.serving
            policies = cluster.apply(lambda c: alert_policies(c, dcgm, alerts, channels, serving=serving))
            for key in alert_policies("", dcgm, alerts, channels, serving=serving):
                policy = policies.apply(itemgetter(key))
                self.alert_policies.append(
                    monitoring.AlertPolicy(
                        f"{name}-{key}",
                        project=project,
                        **{field: policy.apply(itemgetter(field)) for field in POLICY_FIELDS},
                        opts=child,
                    )
                )
            if spec.fleet_workers:
                unreachable = cluster.apply(
                    lambda c: _policy(worker_unreachable_rule(c, fleet_workers), channels=channels)
                )
                self.alert_policies.append(
                    monitoring.AlertPolicy(
                        f"{name}-fleet-worker-unreachable",
                        project=project,
                        **{field: unreachable.apply(itemgetter(field)) for field in POLICY_FIELDS},
                        # Its series comes from the kube-state-metrics the fleet's manager runs
                        # (MultiKueueStateMetrics); without it, its absent() branch fires for every
                        # worker: an unwatched fleet is an alarm too (docs/fleet-monitoring.md).
                        enabled=True,
                        opts=child,
                    )
                )
        self.alert_policy_names = pulumi.Output.all(*[p.name for p in self.alert_policies])
        self.register_outputs(
            {
                "dashboardUrl": self.dashboard_url,
                "fleetDashboardUrl": self.fleet_dashboard_url,
                "alertPolicyNames": self.alert_policy_names,
            }
        )


def _console_url(dashboard: monitoring.Dashboard, project: Any) -> pulumi.Output[str]:
    return pulumi.Output.all(dashboard.id, project).apply(
        lambda values: (
            "https://console.cloud.google.com/monitoring/dashboards/builder/"
            f"{values[0].rsplit('/', 1)[-1]}?project={values[1]}"
        )
    )


def _checked_cluster_name(
    component: str, queried: bool, value: str, *, fleet: tuple[list[str], dict[str, str]] | None = None
) -> str:
    """The cluster's name once known: it reaches PromQL and Monitoring filters unescaped, so it must
    be a label value, and a fleet's manager a GKE cluster name apart from its workers' (an Output is
    checked here, a plain value at the boundary already)."""
    if (queried and not value) or len(value) > 63 or not LABEL_VALUE_PATTERN.fullmatch(value):
        raise InvalidArgsError(
            "GpuMonitoring",
            component,
            [Problem("cluster_name", f"{cut(value)} is not a Kubernetes label value")],
        )
    if fleet is not None:
        keys = ("cluster_name", "fleet_workers[{i}].name", "fleet_workers[{i}].cluster_name")
        problems = check_fleet(value, *fleet, keys=keys)
        if problems:
            raise InvalidArgsError("GpuMonitoring", component, problems)
    return value


# The AlertPolicy arguments each policy sets (alert_policies' keys).
POLICY_FIELDS = (
    "display_name",
    "combiner",
    "severity",
    "notification_channels",
    "documentation",
    "user_labels",
    "conditions",
)


def alert_policies(
    cluster: str, dcgm: str, alerts: AlertThresholds, channels: Sequence[str], *, serving: bool = False
) -> dict[str, dict[str, Any]]:
    """Alert policy arguments keyed by a short name; PromQL over Managed Service for Prometheus.

    The rules themselves (query, duration, words) live in gke_gpu.monitoring.alert_rules, which the tests
    also turn into a Prometheus rules file and run through promtool.
    """
    rules = alert_rules(cluster, dcgm, alerts, serving=serving)
    return {rule.key: _policy(rule, channels=channels) for rule in rules}


def _policy(rule: AlertRule, *, channels: Sequence[str]) -> dict[str, Any]:
    return {
        "display_name": rule.display_name,
        "combiner": "OR",
        "severity": rule.severity,
        "notification_channels": list(channels),
        "documentation": monitoring.AlertPolicyDocumentationArgs(
            content=rule.documentation, mime_type="text/markdown"
        ),
        "user_labels": {"managed-by": "pulumi", "app": "gke-gpu"},
        "conditions": [
            monitoring.AlertPolicyConditionArgs(
                display_name=rule.condition,
                condition_prometheus_query_language=monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                    query=rule.query,
                    duration=rule.duration,
                    evaluation_interval=EVALUATION_INTERVAL,
                    # Name the rule as a Prometheus rules file would: the tests rebuild that file
                    # from these conditions.
                    rule_group=RULE_GROUP,
                    alert_rule=rule.alert,
                    # The DCGM series only exist once a GPU node has run: create the policy anyway.
                    disable_metric_validation=True,
                ),
            )
        ],
    }
