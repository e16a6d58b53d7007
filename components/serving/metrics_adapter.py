"""CustomMetricsAdapter: Google's Custom Metrics Stackdriver Adapter, so a HorizontalPodAutoscaler can
scale on metrics in Cloud Monitoring, Managed Prometheus' vLLM series among them."""

import hashlib
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pulumi_gcp import projects, serviceaccount

from ..core.arg_types import K8sName, ProjectId
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import pod_security_labels
from ..core.validation import ArgsModel

# The adapter's production manifest (the new resource model), pinned to the commit that moved it to
# image v0.16.9-gke.0: the tag cm-sd-adapter-v0.16.9 still names v0.16.7 (docs/serving-research.md 7).
ADAPTER_COMMIT = "af49d863755c0535f598cfde9288ae9a75251d38"
ADAPTER_MANIFEST = (
    "https://raw.githubusercontent.com/GoogleCloudPlatform/k8s-stackdriver/"
    f"{ADAPTER_COMMIT}/custom-metrics-stackdriver-adapter/deploy/production/adapter_new_resource_model.yaml"
)
ADAPTER_NAMESPACE = "custom-metrics"
ADAPTER_KSA = "custom-metrics-stackdriver-adapter"


class CustomMetricsAdapterArgs(TypedDict):
    """The cluster the adapter serves."""

    project: str
    """The cluster's GCP project: the adapter reads its Cloud Monitoring metrics."""
    cluster_name: str
    """The cluster's name: the adapter's Google service account id is derived from it."""


class _AdapterSpec(ArgsModel):
    project: ProjectId
    cluster_name: K8sName


def adapter_account_id(cluster_name: str) -> str:
    """The adapter's Google service account id (6-30 chars), one per cluster."""
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:6]
    return f"cm-{cluster_name[:19].rstrip('-')}-{digest}"


class CustomMetricsAdapter(GkeGpuComponent[_AdapterSpec]):
    """Google's Custom Metrics Stackdriver Adapter from its pinned upstream manifest, which serves the
    custom and external metrics APIs from Cloud Monitoring. It reads metrics as a Google service
    account of its own with `roles/monitoring.viewer` on the project, which only the adapter's
    Kubernetes account may act as (Workload Identity; the account is annotated after the manifest
    creates it). One per cluster: it claims the cluster's custom and external metrics APIs, so it does
    not go with another adapter (prometheus-adapter, KEDA's metrics server)."""

    _args_model = _AdapterSpec
    _args_type = CustomMetricsAdapterArgs

    def __init__(
        self,
        name: str,
        /,
        args: CustomMetricsAdapterArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        account = serviceaccount.Account(
            f"{name}-account",
            account_id=adapter_account_id(spec.cluster_name),
            project=spec.project,
            display_name=f"Custom metrics adapter of {spec.cluster_name}"[:100],
            opts=child,
        )
        grants: list[pulumi.Resource] = [
            projects.IAMMember(
                f"{name}-monitoring-viewer",
                project=spec.project,
                role="roles/monitoring.viewer",
                member=account.email.apply(lambda email: f"serviceAccount:{email}"),
                opts=child,
            ),
            serviceaccount.IAMMember(
                f"{name}-workload-identity",
                service_account_id=account.name,
                role="roles/iam.workloadIdentityUser",
                member=f"serviceAccount:{spec.project}.svc.id.goog[{ADAPTER_NAMESPACE}/{ADAPTER_KSA}]",
                opts=child,
            ),
        ]
        manifest = k8s.yaml.v2.ConfigFile(
            f"{name}-manifest",
            file=ADAPTER_MANIFEST,
            opts=pulumi.ResourceOptions(parent=self, depends_on=grants),
        )
        # The manifest's ServiceAccount, annotated with the Google account (a server-side apply patch
        # of one field; the manifest leaves annotations alone).
        annotation: dict[str, Any] = {"iam.gke.io/gcp-service-account": account.email}
        k8s.core.v1.ServiceAccountPatch(
            f"{name}-ksa-identity",
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                name=ADAPTER_KSA, namespace=ADAPTER_NAMESPACE, annotations=annotation
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[manifest]),
        )
        # The manifest's namespace gets Pod Security labels (a server-side apply patch of the labels
        # only): the adapter needs no host access (UNVERIFIED that it passes restricted, which
        # warnings and audit entries report).
        k8s.core.v1.NamespacePatch(
            f"{name}-namespace-pod-security",
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                name=ADAPTER_NAMESPACE,
                labels={
                    **pod_security_labels("baseline", "restricted"),
                },
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[manifest]),
        )
        self.register_outputs({})
