"""kube-state-metrics in each cluster of a MultiKueue fleet, reporting only the state of Kueue's objects
the fleet's dashboard and worker-unreachable alert read (monitoring/fleet.py): on the manager each
MultiKueueCluster's conditions and where each Workload runs, on a worker its ClusterQueues. It reads
them through the API with its own account's short-lived, rotated token and serves them over plain HTTP
to Managed Prometheus' collectors only: no token is stored for the scrape.

kubernetes/kube-state-metrics tag v2.20.0 (commit 4ffeda2e): `--custom-resource-state-only` and
`--custom-resource-state-config-file` (pkg/options/options.go; with the first, only the configured
custom resources are reported, pkg/app/server.go), `--port` 8080 and `--telemetry-port` 8081 (same
file's defaults), the config format and the RBAC it needs, list and watch on
customresourcedefinitions.apiextensions.k8s.io and on the resources reported
(docs/metrics/extend/customresourcestate-metrics.md), the container's ports, probes, user 65534 and
security settings (examples/standard/deployment.yaml)."""

import hashlib
from typing import Any, Literal, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml

from ..core import images
from ..core.arg_types import K8sName
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import (
    app_labels,
    image_version,
    pod_security_labels,
    restricted_container_security_context,
    restricted_pod_security_context,
    selector_labels,
)
from ..core.validation import ArgsModel
from .fleet import state_config as fleet_state_config

APP = "kube-state-metrics"
METRICS_PORT, METRICS_PORT_NAME = 8080, "http-metrics"
TELEMETRY_PORT, TELEMETRY_PORT_NAME = 8081, "telemetry"
CONFIG_DIR, CONFIG_KEY = "/etc/kube-state-metrics", "custom-resource-state.yaml"
# The user of upstream's example Deployment (nobody).
USER = 65534
# Managed Prometheus' collectors on GKE (prometheus-engine manifests/operator.yaml: the DaemonSet
# `collector` runs as the ServiceAccount `collector` in `gmp-system`).
GMP_NAMESPACE = "gmp-system"
Role = Literal["manager", "worker"]
# What each role reports: the Kueue kinds of its state config.
KINDS: dict[str, list[str]] = {"manager": ["multikueueclusters", "workloads"], "worker": ["clusterqueues"]}


def rules(role: str) -> list[dict[str, list[str]]]:
    """The least kube-state-metrics needs for the role's state config (customresourcestate-metrics.md,
    "RBAC-enabled Clusters"): the CRDs, to find the configured kinds, and the kinds themselves."""
    return [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": ["kueue.x-k8s.io"], "resources": KINDS[role], "verbs": ["list", "watch"]},
    ]


ARGS = [
    "--custom-resource-state-only=true",
    f"--custom-resource-state-config-file={CONFIG_DIR}/{CONFIG_KEY}",
    f"--port={METRICS_PORT}",
    f"--telemetry-port={TELEMETRY_PORT}",
]


class MultiKueueStateMetricsArgs(TypedDict):
    namespace: NotRequired[str]
    """The namespace it gets, created with Pod Security `restricted` enforced. Defaults to
    kube-state-metrics."""
    role: NotRequired[Role]
    """`manager`: each MultiKueueCluster's conditions and where each Workload runs; `worker`: its
    ClusterQueues' pending and admitted workloads and GPUs in use. Defaults to manager."""


class _Spec(ArgsModel):
    namespace: K8sName = APP
    role: Role = "manager"


def state_config(role: str = "manager") -> str:
    """The custom resource state config file, as kube-state-metrics reads it."""
    return yaml.safe_dump(fleet_state_config(role), sort_keys=False)


class MultiKueueStateMetrics(GkeGpuComponent[_Spec]):
    """A namespace (Pod Security `restricted` enforced), a ServiceAccount allowed only to list and
    watch CRDs and the Kueue kinds its role reports, the state config in a ConfigMap, a one-replica
    Deployment of kube-state-metrics v2.20.0 reporting nothing but that config's metrics, a
    NetworkPolicy that lets only Managed Prometheus' collectors (gmp-system) reach its metrics port,
    and the PodMonitoring `kube-state-metrics` that scrapes it.

    Not managed: egress (it calls the API server, whose address the policy cannot name here) and GKE's
    own kube-state-metrics package (which does not report custom resources)."""

    pod_monitoring_name: pulumi.Output[str]
    """The PodMonitoring's name: the `job` label of its series."""

    _args_model = _Spec

    def __init__(
        self,
        name: str,
        /,
        args: MultiKueueStateMetricsArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        namespace = spec.namespace
        labels = app_labels(APP, component="monitoring", version=image_version(images.KUBE_STATE_METRICS))
        match = selector_labels(labels)

        def meta(namespaced: bool = True) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=APP, namespace=namespace if namespaced else None, labels=labels
            )

        ns = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=namespace, labels={**labels, **pod_security_labels("restricted", "restricted")}
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[ns])
        account = k8s.core.v1.ServiceAccount(f"{name}-account", metadata=meta(), opts=in_namespace)
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=meta(namespaced=False),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=r["apiGroups"], resources=r["resources"], verbs=r["verbs"]
                )
                for r in rules(spec.role)
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=meta(namespaced=False),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=APP
            ),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=APP, namespace=namespace)],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, account]),
        )
        config = state_config(spec.role)
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-config", metadata=meta(), data={CONFIG_KEY: config}, opts=in_namespace
        )
        container = k8s.core.v1.ContainerArgs(
            name=APP,
            image=images.KUBE_STATE_METRICS,
            image_pull_policy="IfNotPresent",
            args=list(ARGS),
            ports=[
                k8s.core.v1.ContainerPortArgs(
                    name=METRICS_PORT_NAME, container_port=METRICS_PORT, protocol="TCP"
                ),
                k8s.core.v1.ContainerPortArgs(
                    name=TELEMETRY_PORT_NAME, container_port=TELEMETRY_PORT, protocol="TCP"
                ),
            ],
            resources=k8s.core.v1.ResourceRequirementsArgs(
                requests={"cpu": "10m", "memory": "32Mi"}, limits={"cpu": "100m", "memory": "128Mi"}
            ),
            security_context=restricted_container_security_context(),
            volume_mounts=[k8s.core.v1.VolumeMountArgs(name="config", mount_path=CONFIG_DIR, read_only=True)],
            liveness_probe=_probe("/livez", METRICS_PORT_NAME),
            readiness_probe=_probe("/readyz", TELEMETRY_PORT_NAME),
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=match),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        labels=labels,
                        # A new config rolls the Pod, whether or not it reloads the file itself.
                        annotations={"gke-gpu/config-sha256": hashlib.sha256(config.encode()).hexdigest()},
                    ),
                    spec=k8s.core.v1.PodSpecArgs(
                        service_account_name=APP,
                        enable_service_links=False,
                        security_context=restricted_pod_security_context(USER),
                        node_selector={"kubernetes.io/os": "linux"},
                        containers=[container],
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="config", config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=APP)
                            )
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns, config_map, binding]),
        )
        # Managed Prometheus' collectors are Pods in gmp-system (monitoring/dcgm_exporter.py); the
        # kubelet's probes come from the node, which network policies always admit.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-networkpolicy",
            metadata=meta(),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=match),
                policy_types=["Ingress"],
                ingress=[
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={"kubernetes.io/metadata.name": GMP_NAMESPACE}
                                )
                            )
                        ],
                        ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=METRICS_PORT, protocol="TCP")],
                    )
                ],
            ),
            opts=in_namespace,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-podmonitoring",
            api_version="monitoring.googleapis.com/v1",
            kind="PodMonitoring",
            metadata=meta(),
            spec={
                "selector": {"matchLabels": match},
                "endpoints": [{"port": METRICS_PORT_NAME, "interval": "30s"}],
                # No pod/container target labels: the series carry what fleet.py's alert matches on.
                "targetLabels": {"metadata": []},
            },
            opts=in_namespace,
        )
        self.pod_monitoring_name = pulumi.Output.from_input(APP)
        self.register_outputs({"podMonitoringName": self.pod_monitoring_name})


def _probe(path: str, port: str) -> k8s.core.v1.ProbeArgs:
    return k8s.core.v1.ProbeArgs(
        http_get=k8s.core.v1.HTTPGetActionArgs(path=path, port=port),
        initial_delay_seconds=5,
        timeout_seconds=5,
    )
