"""NVIDIA's DCGM exporter as a DaemonSet on the GPU nodes, with a Service and a scrape config."""

import csv
import hashlib
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ..core import images
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.data import DATA_DIR
from ..core.image_digests import pinned
from ..core.k8s import (
    GKE_DRIVER_HOST_DIR,
    app_labels,
    image_version,
    pod_security_labels,
    require_node_labels,
    selector_labels,
    toleration_args,
)
from .dcgm_exporter_args import DcgmExporterArgs, DcgmExporterSpec, exporter_rules

METRICS_PORT = 9400
POD_RESOURCES_PATH = "/var/lib/kubelet/pod-resources"
# The DCGM fields to collect: our own list (the image's default leaves out DCGM_FI_PROF_SM_ACTIVE),
# from a ConfigMap, passed with --collectors. Its own directory: the image's files stay visible.
COLLECTORS_FILE = DATA_DIR / "dcgm-collectors.csv"
COLLECTORS_DIR = "/etc/dcgm-exporter/gke-gpu"
COLLECTORS_KEY = "counters.csv"
# The Prometheus types the pinned exporter accepts in that file.
COLLECTOR_TYPES = frozenset({"gauge", "counter", "histogram", "summary", "label"})
# Writable paths on an otherwise read-only root filesystem: DCGM's host engine log
# (/var/log/nv-hostengine.log by default) and the exporter's temporary and debug-dump files (/tmp).
WRITABLE_PATHS = {"tmp": "/tmp", "var-log": "/var/log"}


class DcgmExporter(GkeGpuComponent[DcgmExporterSpec]):
    """Namespace, ServiceAccount, collectors ConfigMap, DaemonSet, headless Service, NetworkPolicy
    and the scrape object.

    Least privilege it can run with:

    * GKE: privileged, because GKE has no NVIDIA container runtime to hand the exporter the
      ``/dev/nvidia*`` devices of a node, and the device cgroup only opens them to privileged
      containers. Host paths are mounted read-only (the driver, the kubelet's pod-resources socket
      that maps GPUs to Pods); no service account token is mounted (the exporter never calls the
      API server).
    * generic: not privileged; root with only ``SYS_ADMIN`` (needed for the ``DCGM_FI_PROF_*``
      profiling metrics) and every other capability dropped, as NVIDIA's own manifest does.
    * Both: read-only root filesystem (emptyDir for /tmp and /var/log), seccomp ``RuntimeDefault``
      (containerd runs privileged containers unconfined, so on GKE it only takes effect if the
      exporter ever stops being privileged), and a NetworkPolicy that admits only the scraper's
      namespace to the metrics port and lets the exporter open no connection at all.

    Do not combine with GKE's managed DCGM (duplicate series): the config refuses it.
    """

    namespace: pulumi.Output[str]
    """The exporter's namespace."""
    scrape: pulumi.Output[str]
    """What scrapes the metrics: podMonitoring, serviceMonitor or annotations."""

    _args_model = DcgmExporterSpec
    _args_rules = staticmethod(exporter_rules)

    def __init__(
        self,
        name: str,
        /,
        args: DcgmExporterArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        self._declare(name, spec)
        self.namespace = pulumi.Output.from_input(spec.namespace)
        self.scrape = pulumi.Output.from_input(spec.scrape)
        self.register_outputs({"namespace": self.namespace, "scrape": self.scrape})

    def _declare(self, name: str, spec: DcgmExporterSpec) -> None:
        child = pulumi.ResourceOptions(parent=self)
        labels = app_labels(
            "dcgm-exporter", component="gpu-metrics", version=image_version(images.DCGM_EXPORTER)
        )
        match = selector_labels(labels)
        gke = spec.flavor == "gke"

        self.k8s_namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=spec.namespace,
                labels={
                    **app_labels(spec.namespace, component="gpu-monitoring"),
                    # The exporter needs host paths (and privilege on GKE)...
                    # ...an exception kept visible: `kubectl apply` warns and the audit log records
                    # every Pod here that the baseline standard would refuse.
                    **pod_security_labels("privileged", "baseline"),
                },
            ),
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[self.k8s_namespace])
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="dcgm-exporter", namespace=spec.namespace, labels=labels
            ),
            automount_service_account_token=False,
            opts=in_namespace,
        )
        collectors = collectors_csv()
        self.collectors = k8s.core.v1.ConfigMap(
            f"{name}-collectors",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="dcgm-exporter-collectors", namespace=spec.namespace, labels=labels
            ),
            data={COLLECTORS_KEY: collectors},
            opts=in_namespace,
        )

        env = {
            "DCGM_EXPORTER_LISTEN": f":{METRICS_PORT}",
            "DCGM_EXPORTER_KUBERNETES": "true",
        }
        volumes = [
            k8s.core.v1.VolumeArgs(
                name="pod-resources",
                host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=POD_RESOURCES_PATH, type="Directory"),
            ),
            k8s.core.v1.VolumeArgs(
                name="collectors",
                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name="dcgm-exporter-collectors"),
            ),
            *(
                k8s.core.v1.VolumeArgs(
                    name=volume, empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="64Mi")
                )
                for volume in WRITABLE_PATHS
            ),
        ]
        mounts = [
            k8s.core.v1.VolumeMountArgs(name="pod-resources", mount_path=POD_RESOURCES_PATH, read_only=True),
            k8s.core.v1.VolumeMountArgs(name="collectors", mount_path=COLLECTORS_DIR, read_only=True),
            *(
                k8s.core.v1.VolumeMountArgs(name=volume, mount_path=path)
                for volume, path in WRITABLE_PATHS.items()
            ),
        ]
        if gke:
            # GKE's device plugin names devices nvidia0, nvidia0/vgpu1, ...: match Pods by name.
            env["DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"] = "device-name"
            env["LD_LIBRARY_PATH"] = "/usr/local/nvidia/lib64"
            volumes.append(
                k8s.core.v1.VolumeArgs(
                    name="nvidia-driver",
                    host_path=k8s.core.v1.HostPathVolumeSourceArgs(
                        path=GKE_DRIVER_HOST_DIR, type="Directory"
                    ),
                )
            )
            mounts.append(
                k8s.core.v1.VolumeMountArgs(
                    name="nvidia-driver", mount_path="/usr/local/nvidia", read_only=True
                )
            )
            security = k8s.core.v1.SecurityContextArgs(privileged=True, read_only_root_filesystem=True)
        else:
            env["NVIDIA_VISIBLE_DEVICES"] = "all"
            security = k8s.core.v1.SecurityContextArgs(
                run_as_non_root=False,
                run_as_user=0,
                allow_privilege_escalation=False,
                read_only_root_filesystem=True,
                capabilities=k8s.core.v1.CapabilitiesArgs(add=["SYS_ADMIN"], drop=["ALL"]),
            )

        container = k8s.core.v1.ContainerArgs(
            name="dcgm-exporter",
            image=pinned(images.DCGM_EXPORTER, spec.image_digests),
            image_pull_policy="IfNotPresent",
            # The image's entrypoint passes its arguments on to dcgm-exporter.
            args=["--collectors", f"{COLLECTORS_DIR}/{COLLECTORS_KEY}"],
            env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in sorted(env.items())]
            + [
                k8s.core.v1.EnvVarArgs(
                    name="NODE_NAME",
                    value_from=k8s.core.v1.EnvVarSourceArgs(
                        field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="spec.nodeName")
                    ),
                )
            ],
            ports=[
                k8s.core.v1.ContainerPortArgs(name="metrics", container_port=METRICS_PORT, protocol="TCP")
            ],
            resources=k8s.core.v1.ResourceRequirementsArgs(
                requests={"cpu": "100m", "memory": "128Mi"},
                limits={"cpu": "500m", "memory": "512Mi"},
            ),
            security_context=security,
            volume_mounts=mounts,
            liveness_probe=_health_probe(initial_delay=45),
            readiness_probe=_health_probe(initial_delay=15),
        )
        affinity = require_node_labels(spec.required_node_labels)
        self.daemon_set: k8s.apps.v1.DaemonSet = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="dcgm-exporter", namespace=spec.namespace, labels=labels
            ),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=match),
                update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(
                    type="RollingUpdate",
                    rolling_update=k8s.apps.v1.RollingUpdateDaemonSetArgs(max_unavailable="25%"),
                ),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        labels=labels,
                        # The exporter reads its field list only at start: a change rolls the Pods.
                        annotations={
                            "gke-gpu/collectors-sha256": hashlib.sha256(collectors.encode()).hexdigest()
                        },
                    ),
                    spec=k8s.core.v1.PodSpecArgs(
                        service_account_name="dcgm-exporter",
                        runtime_class_name=spec.runtime_class_name,
                        automount_service_account_token=False,
                        enable_service_links=False,
                        security_context=k8s.core.v1.PodSecurityContextArgs(
                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")
                        ),
                        node_selector=dict(spec.node_selector) if spec.node_selector else None,
                        affinity=affinity,
                        tolerations=[toleration_args(t) for t in spec.tolerations],
                        containers=[container],
                        volumes=volumes,
                        termination_grace_period_seconds=10,
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.k8s_namespace, self.service_account, self.collectors]
            ),
        )

        service_annotations = None
        if spec.scrape == "annotations":
            service_annotations = {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(METRICS_PORT),
                "prometheus.io/path": "/metrics",
            }
        self.service: k8s.core.v1.Service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="dcgm-exporter", namespace=spec.namespace, labels=labels, annotations=service_annotations
            ),
            spec=k8s.core.v1.ServiceSpecArgs(
                # Headless: one DNS record per exporter Pod; scrapers want each node, not a balance.
                cluster_ip="None",
                selector=match,
                ports=[k8s.core.v1.ServicePortArgs(name="metrics", port=METRICS_PORT, target_port="metrics")],
            ),
            opts=in_namespace,
        )
        # Managed Prometheus' collectors are ordinary Pods in gmp-system (not hostNetwork), so a
        # namespace selector matches them. The kubelet's probes come from the node, which network
        # policies always admit.
        self.network_policy: k8s.networking.v1.NetworkPolicy = k8s.networking.v1.NetworkPolicy(
            f"{name}-networkpolicy",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="dcgm-exporter", namespace=spec.namespace, labels=labels
            ),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=match),
                policy_types=["Ingress", "Egress"],
                ingress=[
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={"kubernetes.io/metadata.name": spec.scraper_namespace}
                                )
                            )
                        ],
                        ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=METRICS_PORT, protocol="TCP")],
                    )
                ],
                # No egress: DCGM runs embedded and the Pod-to-GPU map comes from the kubelet's local
                # socket; the exporter opens no connection.
                egress=[],
            ),
            opts=in_namespace,
        )

        self.scrape_config: pulumi.CustomResource | None = None
        if spec.scrape == "podMonitoring":
            self.scrape_config = k8s.apiextensions.CustomResource(
                f"{name}-podmonitoring",
                api_version="monitoring.googleapis.com/v1",
                kind="PodMonitoring",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name="dcgm-exporter", namespace=spec.namespace, labels=labels
                ),
                spec={
                    "selector": {"matchLabels": match},
                    "endpoints": [{"port": "metrics", "interval": spec.scrape_interval}],
                    # As Google's DCGM example: no pod/container target labels, so the exporter's
                    # own (the GPU's workload) keep their names instead of becoming exported_*.
                    # (`namespace` stays the target's: the workload's becomes exported_namespace.)
                    "targetLabels": {"metadata": []},
                },
                opts=in_namespace,
            )
        elif spec.scrape == "serviceMonitor":
            self.scrape_config = k8s.apiextensions.CustomResource(
                f"{name}-servicemonitor",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name="dcgm-exporter", namespace=spec.namespace, labels=labels
                ),
                spec={
                    "selector": {"matchLabels": match},
                    "namespaceSelector": {"matchNames": [spec.namespace]},
                    "endpoints": [{"port": "metrics", "path": "/metrics", "interval": spec.scrape_interval}],
                },
                opts=in_namespace,
            )


def collectors_csv() -> str:
    """The collectors file, checked as the exporter reads it."""
    text = COLLECTORS_FILE.read_text()
    collected_fields(text)
    return text


def collected_fields(text: str) -> dict[str, str]:
    """DCGM field name -> Prometheus type, read as dcgm-exporter reads its collectors file (CSV,
    `#` comments, three fields a line); raises ValueError where the exporter would refuse it."""
    fields: dict[str, str] = {}
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for record in csv.reader(lines):
        if len(record) != 3:
            raise ValueError(f"collectors: expected 3 fields, got {record}")
        field, kind, _help = (value.strip(" ") for value in record)
        if not field.startswith("DCGM_FI_") or kind not in COLLECTOR_TYPES:
            raise ValueError(f"collectors: {field!r} {kind!r} is not a DCGM field and Prometheus type")
        if field in fields:
            raise ValueError(f"collectors: {field} listed twice")
        fields[field] = kind
    return fields


def _health_probe(*, initial_delay: int) -> "k8s.core.v1.ProbeArgs":
    return k8s.core.v1.ProbeArgs(
        http_get=k8s.core.v1.HTTPGetActionArgs(path="/health", port=METRICS_PORT),
        initial_delay_seconds=initial_delay,
        period_seconds=10,
        failure_threshold=6,
    )
