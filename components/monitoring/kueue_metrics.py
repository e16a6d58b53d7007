"""Kueue's metrics scraped by Google Cloud Managed Service for Prometheus.

Kueue v0.19.2 (kubernetes-sigs/kueue@8eab6877) serves /metrics over HTTPS on its controller's
container port `metrics` (8443; charts/kueue/templates/manager/manager.yaml), behind
controller-runtime's authentication and authorization filter (cmd/kueue/main.go: `SecureServing`,
`filters.WithAuthenticationAndAuthorization`): a scrape needs a bearer token whose subject may GET
the non-resource URL /metrics (the chart's own `<release>-metrics-reader` ClusterRole). With Kueue's
internal certificate management (the chart's default) no certificate is mounted for the metrics
server, so controller-runtime serves a self-signed one (its documented behaviour, UNVERIFIED at the
version Kueue pins); the chart's own ServiceMonitor skips verifying it (values.yaml
`metrics.serviceMonitor.tlsConfig.insecureSkipVerify: true`).

Managed Prometheus' PodMonitoring (monitoring.googleapis.com/v1, GoogleCloudPlatform/prometheus-engine
@2ffde4ec `pkg/operator/apis/monitoring/v1/http_types.go`) takes `scheme`, `authorization` (type
Bearer, `credentials.secret` in the PodMonitoring's own namespace) and `tls.insecureSkipVerify`. Its
collector (ServiceAccount `collector` in `gmp-system`) reads the Secret only where a Role grants it
(examples/instrumentation/go-synthetic/go-synthetic-basic-auth.yaml and
examples/inference-optimized-gateway/secret.yaml at the same commit, which also make the token the
way this module does: a ServiceAccount's token Secret bound to a /metrics reader ClusterRole).
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from ..core.arg_types import K8sName
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels
from ..core.validation import ArgsModel

# Managed Prometheus' collectors on GKE (prometheus-engine manifests/operator.yaml: the DaemonSet
# `collector` runs as the ServiceAccount `collector` in `gmp-system`).
GMP_NAMESPACE = "gmp-system"
GMP_COLLECTOR = "collector"
SCRAPER = "kueue-metrics-scraper"
TOKEN_SECRET = f"{SCRAPER}-token"
# Kueue's controller Pods (charts/kueue/templates/_helpers.tpl `kueue.selectorLabels`, with the chart's
# name: the instance label is the Helm release's, which differs per cluster, so it is not matched).
KUEUE_POD_LABELS = {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"}
KUEUE_METRICS_PORT = "metrics"
# The chart's metrics-reader ClusterRole, the least a scrape needs (charts/kueue/templates/rbac/
# metrics_reader_role.yaml); declared here under a name of its own, since the chart's name carries
# the Helm release's.
METRICS_READER_RULES: list[dict[str, Any]] = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
SCRAPE_INTERVAL = "30s"


class KueueMetricsScrapeArgs(TypedDict):
    namespace: NotRequired[str]
    """Kueue's namespace (its chart's release namespace). Defaults to kueue-system."""


class _Spec(ArgsModel):
    namespace: K8sName = "kueue-system"


def scrape_endpoint(secret: str = TOKEN_SECRET) -> dict[str, Any]:
    """The PodMonitoring endpoint of Kueue's metrics: HTTPS with the token, the self-signed
    certificate not verified (what Kueue's own ServiceMonitor does)."""
    return {
        "port": KUEUE_METRICS_PORT,
        "scheme": "https",
        "path": "/metrics",
        "interval": SCRAPE_INTERVAL,
        "authorization": {"type": "Bearer", "credentials": {"secret": {"name": secret, "key": "token"}}},
        "tls": {"insecureSkipVerify": True},
    }


class KueueMetricsScrape(GkeGpuComponent[_Spec]):
    """In Kueue's namespace: a ServiceAccount `kueue-metrics-scraper` bound to a ClusterRole that may
    only GET /metrics, its token Secret, a Role letting Managed Prometheus' collector read that one
    Secret, and a PodMonitoring `kueue` that scrapes Kueue's controller over HTTPS with the token.

    Not managed: Managed Prometheus itself (the cluster turns managed collection on) and Kueue (its
    chart). The token is a long-lived ServiceAccount token that can read metrics and nothing else."""

    pod_monitoring_name: pulumi.Output[str]
    """The PodMonitoring's name: the `job` label of every Kueue series."""

    _args_model = _Spec

    def __init__(
        self,
        name: str,
        /,
        args: KueueMetricsScrapeArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = spec.namespace
        labels = app_labels(SCRAPER, component="monitoring")

        def meta(object_name: str, *, namespaced: bool = True, **extra: Any) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=object_name, namespace=namespace if namespaced else None, labels=labels, **extra
            )

        def after(*resources: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=list(resources))

        account = k8s.core.v1.ServiceAccount(
            f"{name}-account", metadata=meta(SCRAPER), automount_service_account_token=False, opts=child
        )
        reader = k8s.rbac.v1.ClusterRole(
            f"{name}-reader",
            metadata=meta(SCRAPER, namespaced=False),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(non_resource_urls=r["nonResourceURLs"], verbs=r["verbs"])
                for r in METRICS_READER_RULES
            ],
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-reader-binding",
            metadata=meta(SCRAPER, namespaced=False),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=SCRAPER
            ),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=SCRAPER, namespace=namespace)],
            opts=after(reader, account),
        )
        # The token controller fills the Secret's data with the account's token.
        token = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=meta(TOKEN_SECRET, annotations={"kubernetes.io/service-account.name": SCRAPER}),
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[account], additional_secret_outputs=["data"]
            ),
        )
        secret_reader = k8s.rbac.v1.Role(
            f"{name}-token-reader",
            metadata=meta(f"{TOKEN_SECRET}-reader"),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=[""],
                    resources=["secrets"],
                    resource_names=[TOKEN_SECRET],
                    verbs=["get", "list", "watch"],
                )
            ],
            opts=child,
        )
        collector_binding = k8s.rbac.v1.RoleBinding(
            f"{name}-token-reader-binding",
            metadata=meta(f"{GMP_NAMESPACE}:{GMP_COLLECTOR}:{TOKEN_SECRET}-reader"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="Role", name=f"{TOKEN_SECRET}-reader"
            ),
            subjects=[
                k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=GMP_COLLECTOR, namespace=GMP_NAMESPACE)
            ],
            opts=after(secret_reader),
        )
        self.pod_monitoring = k8s.apiextensions.CustomResource(
            f"{name}-podmonitoring",
            api_version="monitoring.googleapis.com/v1",
            kind="PodMonitoring",
            metadata=meta("kueue"),
            spec={
                "selector": {"matchLabels": dict(KUEUE_POD_LABELS)},
                "endpoints": [scrape_endpoint()],
                # No pod/container target labels: Kueue's series keep the labels fleet.py's charts read.
                "targetLabels": {"metadata": []},
            },
            opts=after(token, collector_binding),
        )
        self.pod_monitoring_name = pulumi.Output.from_input("kueue")
        self.register_outputs({"podMonitoringName": self.pod_monitoring_name})
