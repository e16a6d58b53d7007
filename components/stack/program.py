"""The composition root: typed settings in, components declared, stack outputs out.

`__main__.py` calls :func:`build` with the settings that `gke_gpu.stack.config.load_settings` validated;
the offline render and the tests call it the same way, through `__main__.py`, under mocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pulumi

from ..cluster.existing import ExistingCluster, ExistingClusterArgs
from ..core import images
from ..core.image_digests import digests_for
from ..core.k8s import Toleration
from ..gpu.device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from ..gpu.node_labels import GpuNodeLabels
from ..gpu.scheduling import GPU_TOLERATION, gpus_per_pod, node_selector, tolerations, union_tolerations
from ..monitoring.dcgm_exporter_args import DcgmExporterSettings, DcgmFlavor, ScrapeMode
from ..monitoring.gpu_monitoring import AlertPolicies, DcgmSource, GpuMonitoring, GpuMonitoringArgs
from ..workloads.samples import SampleWorkloads
from ..workloads.samples_args import GpuTarget, SampleKind, SampleWorkload, TargetSharing
from .config import ConfigError, GpuPool, Settings
from .declare import Checked, checking_only, declare, declaring_checked
from .pool_outputs import pool_summary
from .program_batch import batch_queues, nccl_allreduce_tests, training_data
from .program_cluster import gke_cluster
from .program_gpudirect import dranet_claim_templates, gpudirect_output
from .program_pools import GpuLayer, gpu_layer
from .program_serving import serving

SAMPLES_NAMESPACE = "gpu-samples"
GKE_DEVICE_PLUGIN_PODS = "kubectl get pods -n kube-system -l k8s-app=nvidia-gpu-device-plugin -o wide"
# The name sample workloads use for "the GPU nodes" of a cluster the program does not manage.
EXISTING_TARGET = "gpu-nodes"
DEVICE_PLUGIN_LOGS = (
    "kubectl logs -n kube-system -l app.kubernetes.io/name=nvidia-device-plugin --tail=50 --prefix"
)
# Lines the NVIDIA device plugin logs when it has found the GPUs and registered with the kubelet.
DEVICE_PLUGIN_HEALTHY_LINES = [
    "Retrieving plugins.",
    "Starting GRPC server for 'nvidia.com/gpu'",
    "Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock",
    "Registered device plugin for 'nvidia.com/gpu' with Kubelet",
]

ALLOCATABLE_GPUS_COLUMNS_GENERIC = r"NODE:.metadata.name,GPUS:.status.allocatable.nvidia\.com/gpu"
ALLOCATABLE_GPUS_COLUMNS = (
    "NODE:.metadata.name,"
    r"POOL:.metadata.labels.cloud\.google\.com/gke-nodepool,"
    r"ACCELERATOR:.metadata.labels.cloud\.google\.com/gke-accelerator,"
    r"GPUS:.status.allocatable.nvidia\.com/gpu"
)


def check_components(settings: Settings, *, component_rules: bool = False) -> Checked:
    """Check every component's args as the stack would declare them, declaring nothing; raise one
    ConfigError keyed by the stack file's sections, or return the checked args for `build`. The
    stack's rules and the components' own checks are meant to agree: this makes sure that a stack
    file the stack's rules accepted never stops half-way through the declarations.

    A render checks the components whose section rules the stack layer ran (stack/declare.py)
    against their args' model only: their rules ran once already. `component_rules` runs every
    component's full rules too; the fuzz tests do, so that the agreement stays checked."""
    with checking_only(component_rules=component_rules) as (problems, checked):
        build(settings)
    if problems:
        raise ConfigError(problems)
    return checked


def build(settings: Settings, checked: Checked | None = None) -> dict[str, Any]:
    """Declare every resource of the stack and return its outputs (`checked`: check_components'
    result, so that no component checks its args again)."""
    if checked is not None:
        with declaring_checked(checked):
            return build(settings)
    if settings.cluster.mode == "existing":
        return _build_existing(settings)
    cluster, vpc = gke_cluster(settings)
    autopilot = settings.cluster.autopilot
    layer = gpu_layer(settings, cluster)
    pools = layer.pools
    monitoring = _monitoring(settings, pulumi.ResourceOptions(providers={"kubernetes": cluster.provider}))
    jobs = cluster_jobs(settings, cluster.provider, layer)
    samples, batch, data = jobs.samples, jobs.batch, jobs.data
    served = serving(
        settings,
        settings.cluster.name or "",
        cluster.provider,
        [*pools.values(), *([layer.driver] if layer.driver else [])],
        # A gateway's load balancer takes its proxies from the VPC's proxy-only subnet.
        network=[vpc] if vpc is not None else [],
        node_service_account=None if autopilot else cluster.node_service_account_email,
        image_reader=cluster.node_service_account_email,
    )

    fleet: dict[str, Any] = {}
    if settings.fleet is not None:
        from .program_fleet import fleet as declare_fleet

        fleet = {"fleet": declare_fleet(settings, cluster.provider, vpc)}
    return {
        "clusterName": cluster.cluster_name,
        "clusterMode": settings.cluster.mode,
        "project": settings.project,
        "region": settings.region,
        "location": cluster.location,
        "endpoint": cluster.endpoint,
        # The DNS-based control-plane endpoint (IAM-checked): what the kubeconfig and kubectl use.
        "dnsEndpoint": cluster.dns_endpoint,
        "kubeconfig": cluster.kubeconfig,
        "nodeServiceAccount": cluster.node_service_account_email,
        "gpuPools": [pool_summary(pool, autopilot=autopilot) for pool in settings.gpu_pools],
        "monitoring": _monitoring_summary(settings, monitoring),
        "sampleWorkloads": samples,
        "checks": _checks(settings),
        **({"batchQueues": batch} if settings.batch.kueue else {}),
        **({"trainingData": data} if data else {}),
        **({"gpudirect": gpudirect_output(settings)} if layer.software else {}),
        **({"serving": served} if served else {}),
        **fleet,
    }


@dataclass(frozen=True)
class ClusterJobs:
    """What a cluster runs on its GPU pools, as stack outputs (`sampleWorkloads`, `batchQueues`,
    `trainingData`), and its Kueue component (None without `batch.kueue`)."""

    samples: dict[str, Any]
    batch: list[dict[str, Any]]
    data: dict[str, Any]
    queues: pulumi.Resource | None


def cluster_jobs(
    settings: Settings,
    provider: pulumi.ProviderResource,
    layer: GpuLayer,
    prefix: str = "",
    *,
    cluster_queue_metrics: bool = False,
) -> ClusterJobs:
    """Declare the samples, Kueue with the teams' queues, the all-reduce tests, the DRANET claim
    templates and the teams' training data of a cluster (a fleet worker's: `prefix`)."""
    pools, software, driver = layer.pools, layer.software, layer.driver
    # The namespaces the admission policies confine are made only once the policies exist.
    guards = layer.guards
    autopilot = settings.cluster.autopilot
    targets = {pool.name: gpu_target(pool, autopilot=autopilot) for pool in settings.gpu_pools}
    samples, samples_component = _samples(
        settings, targets, provider, [*pools.values(), *([driver] if driver else [])], prefix
    )
    if not settings.batch.kueue:
        return ClusterJobs(samples, [], {}, None)
    batch, queues = batch_queues(
        settings,
        provider,
        [*pools.values(), *([samples_component] if samples_component else []), *guards],
        local_queue_namespace=SAMPLES_NAMESPACE if samples_component else None,
        prefix=prefix,
        cluster_queue_metrics=cluster_queue_metrics,
    )
    samples.update(
        nccl_allreduce_tests(
            settings, provider, [queues, *software, *guards, *([driver] if driver else [])], prefix
        )
    )
    dranet_claim_templates(settings, provider, [queues], prefix)
    data = training_data(settings, provider, [queues], prefix)
    return ClusterJobs(samples, batch, data, queues)


def cluster_monitoring(settings: Settings, provider: pulumi.ProviderResource, prefix: str) -> dict[str, Any]:
    """A fleet worker's GPU monitoring, as `build` declares a cluster's (its resource names prefixed);
    returns its summary."""
    kubernetes = pulumi.ResourceOptions(providers={"kubernetes": provider})
    return _monitoring_summary(settings, _monitoring(settings, kubernetes, prefix=prefix))


def _monitoring(
    settings: Settings,
    kubernetes: pulumi.ResourceOptions,
    exporter: DcgmExporterSettings | None = None,
    prefix: str = "",
) -> GpuMonitoring | None:
    """The monitoring component; `exporter` says where the exporter runs (default: the GKE pools)."""
    m = settings.monitoring
    if m.dcgm != "exporter" and not m.dashboard and not m.alerts.enabled:
        return None
    assert m.dcgm is not None and m.dashboard is not None, "the settings resolve both"
    args: GpuMonitoringArgs = {"dcgm": DcgmSource(m.dcgm), "dashboard": m.dashboard}
    if settings.project:
        args["project"] = settings.project
    if settings.cluster.name:
        args["cluster_name"] = settings.cluster.name
    if settings.serving and (m.dashboard or m.alerts.enabled):
        # The dashboard's model-server section and the backlog alert.
        args["serving"] = True
    if settings.fleet is not None and (m.dashboard or m.alerts.enabled):
        # The fleet's dashboard and worker-unreachable alert, on the manager (this cluster).
        args["fleet_workers"] = [
            {"name": w.name, "cluster_name": w.settings.cluster.name or w.name}
            for w in settings.fleet.workers
        ]
    if m.dcgm == "exporter":
        assert m.scraper_namespace is not None, "the settings name the scraper's namespace"
        if not exporter:
            exporter = {
                "flavor": DcgmFlavor.GKE,
                "tolerations": _union(
                    tolerations(pool, autopilot=settings.cluster.autopilot) for pool in settings.gpu_pools
                ),
                "scrape": ScrapeMode(m.scrape or "podMonitoring"),
                "scraper_namespace": m.scraper_namespace,
            }
        digests = digests_for(settings.image_digests, [images.DCGM_EXPORTER])
        if digests:
            exporter = {**exporter, "image_digests": digests}
        args["exporter"] = exporter
    if m.alerts.enabled:
        alerts: AlertPolicies = {
            "notification_channels": list(m.alerts.notification_channels),
            "idle_gpu_minutes": m.alerts.idle_gpu_minutes,
            "idle_gpu_utilization_percent": m.alerts.idle_gpu_utilization_percent,
            "xid_errors": m.alerts.xid_errors,
        }
        if settings.serving:
            alerts["serving_queue_backlog"] = m.alerts.serving_queue_backlog
        args["alerts"] = alerts
    return declare(GpuMonitoring, f"{prefix}monitoring", args, opts=kubernetes)


def _union(groups: Any) -> list[Toleration]:
    """Tolerations of several pools without repeats (the GPU taint once)."""
    # The enums' plain values ("Exists"), which the args' check takes as well as the members.
    return cast("list[Toleration]", union_tolerations(groups) or [dict(GPU_TOLERATION)])


def _samples(
    settings: Settings,
    targets: dict[str, GpuTarget],
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    prefix: str = "",
) -> tuple[dict[str, dict[str, str]], pulumi.Resource | None]:
    """Declare the opted-in samples; return, per sample, how to wait for it and read its log (and
    the component, whose namespace the batch queues' LocalQueues use)."""
    # nccl-allreduce is a NcclAllReduce of its own, queued by Kueue (stack/program_batch.py);
    # serving-load a ServingLoadTest beside its service (stack/program_serving.py).
    samples_listed = [w for w in settings.workloads if w.name not in ("nccl-allreduce", "serving-load")]
    if not samples_listed:
        return {}, None
    default = next(iter(targets))
    workloads: list[SampleWorkload] = []
    for w in samples_listed:
        target = targets[w.pool or default].copy()
        workload: SampleWorkload = {"kind": SampleKind(w.name), "target": target}
        if w.replicas is not None:
            workload["replicas"] = w.replicas
        workloads.append(workload)
    samples = declare(
        SampleWorkloads,
        f"{prefix}samples",
        {"workloads": workloads, "namespace": SAMPLES_NAMESPACE},
        # The GPU pools, ComputeClasses or device plugin first, so no sample waits on nothing.
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
    )
    return samples.commands, samples


def gpu_target(pool: GpuPool, *, autopilot: bool) -> GpuTarget:
    """Where a sample runs on a GKE pool or profile (optional keys left out, never None)."""
    target = GpuTarget(
        name=pool.name,
        accelerator=pool.accelerator,
        node_selector=node_selector(pool, autopilot=autopilot),
        # The enums' plain values ("Exists"), which the args' check takes as well as the members.
        tolerations=cast("list[Toleration]", tolerations(pool, autopilot=autopilot)),
        gpus_per_pod=gpus_per_pod(pool, autopilot=autopilot),
    )
    if pool.sharing:
        target["sharing"] = TargetSharing(pool.sharing.strategy)
        target["shared_clients"] = pool.sharing.max_clients_per_gpu
    if pool.dra_gpus:
        # The DRA driver's kubelet plugin injects the driver (CDI), not GKE's device plugin.
        target["dra_gpus"] = True
        target["gke_driver"] = False
    else:
        target["gke_driver"] = True
    return target


def _monitoring_summary(settings: Settings, monitoring: GpuMonitoring | None) -> dict[str, Any]:
    m = settings.monitoring
    return {
        "dcgm": m.dcgm,
        "dashboardUrl": monitoring.dashboard_url if monitoring and monitoring.dashboard_url else None,
        **(
            {"fleetDashboardUrl": monitoring.fleet_dashboard_url}
            if monitoring and monitoring.fleet_dashboard_url
            else {}
        ),
        "alerts": [p.display_name for p in monitoring.alert_policies] if monitoring else [],
    }


def _build_existing(settings: Settings) -> dict[str, Any]:
    """The GPU layer on a cluster the program does not manage (GKE of another team, or generic)."""
    cluster = settings.cluster
    assert cluster.kubeconfig is not None
    existing_args: ExistingClusterArgs = {"kubeconfig": cluster.kubeconfig}
    if cluster.context is not None:
        existing_args["context"] = cluster.context
    existing = declare(ExistingCluster, "cluster", existing_args)
    kubernetes = pulumi.ResourceOptions(providers={"kubernetes": existing.provider})
    gpu_taint: Any = dict(GPU_TOLERATION)
    layer: list[pulumi.Resource] = []
    checks = {"allocatableGpus": f"kubectl get nodes -o custom-columns={ALLOCATABLE_GPUS_COLUMNS_GENERIC}"}
    scraper_namespace = settings.monitoring.scraper_namespace or ""
    if cluster.flavor == "generic":
        plugin = settings.device_plugin
        assert plugin is not None
        node_selector = {plugin.node_label_key: plugin.node_label_value}
        if settings.gpu_nodes:
            layer.append(
                declare(
                    GpuNodeLabels,
                    "gpu-nodes",
                    {
                        "nodes": list(settings.gpu_nodes),
                        "label_key": plugin.node_label_key,
                        "label_value": plugin.node_label_value,
                        "taint": plugin.taint_gpu_nodes,
                    },
                    opts=kubernetes,
                )
            )
        plugin_args: NvidiaDevicePluginArgs = {"node_selector": node_selector}
        if plugin.time_slicing_replicas is not None:
            plugin_args["time_slicing_replicas"] = plugin.time_slicing_replicas
        if plugin.runtime_class_name is not None:
            plugin_args["runtime_class_name"] = plugin.runtime_class_name
        if digests := digests_for(settings.image_digests, [images.DEVICE_PLUGIN]):
            plugin_args["image_digests"] = digests
        layer.append(
            declare(
                NvidiaDevicePlugin,
                "device-plugin",
                plugin_args,
                # After the labels: the plugin's Pods only land on labelled nodes.
                opts=pulumi.ResourceOptions(
                    providers={"kubernetes": existing.provider}, depends_on=list(layer)
                ),
            )
        )
        target: GpuTarget = {
            "name": EXISTING_TARGET,
            "node_selector": node_selector,
            "tolerations": [gpu_taint],
            "gpus_per_pod": 1,
            "gke_driver": False,
        }
        if plugin.time_slicing_replicas:
            target["sharing"] = TargetSharing.TIME_SLICING
            target["shared_clients"] = plugin.time_slicing_replicas
        exporter: DcgmExporterSettings = {
            "flavor": DcgmFlavor.GENERIC,
            "node_selector": node_selector,
            "required_node_labels": [],
            "tolerations": [gpu_taint],
            "scrape": ScrapeMode(settings.monitoring.scrape or "serviceMonitor"),
            "scraper_namespace": scraper_namespace,
        }
        if plugin.runtime_class_name is not None:
            target["runtime_class_name"] = plugin.runtime_class_name
            exporter["runtime_class_name"] = plugin.runtime_class_name
        checks.update(
            gpuNodesByLabel=f"kubectl get nodes -l {plugin.node_label_key}={plugin.node_label_value}",
            devicePluginPods=(
                "kubectl get pods -n kube-system -l app.kubernetes.io/name=nvidia-device-plugin -o wide"
            ),
            devicePluginLogs=DEVICE_PLUGIN_LOGS,
        )
    else:
        # GKE: its own device plugin and labels; any node with a GKE accelerator label is a GPU node.
        target = {
            "name": EXISTING_TARGET,
            "node_selector": {},
            "required_node_labels": ["cloud.google.com/gke-accelerator"],
            "tolerations": [gpu_taint],
            "gpus_per_pod": 1,
            "gke_driver": True,
        }
        exporter = {
            "flavor": DcgmFlavor.GKE,
            "tolerations": [gpu_taint],
            "scrape": ScrapeMode(settings.monitoring.scrape or "podMonitoring"),
            "scraper_namespace": scraper_namespace,
        }
        checks.update(
            devicePluginPods=GKE_DEVICE_PLUGIN_PODS,
            managedDcgm=(
                "kubectl get pods -n gke-managed-system "
                "-l app.kubernetes.io/name=gke-managed-dcgm-exporter -o wide"
            ),
        )
    monitoring = _monitoring(settings, kubernetes, exporter)
    samples, _ = _samples(settings, {EXISTING_TARGET: target}, existing.provider, layer)
    return {
        "clusterMode": "existing",
        "flavor": cluster.flavor,
        "clusterName": cluster.name or None,
        "project": settings.project,
        "gpuNodes": list(settings.gpu_nodes),
        "gpuNodeSelector": dict(target.get("node_selector", {}))
        or {"exists": list(target.get("required_node_labels", []))},
        "devicePluginHealthyLogLines": DEVICE_PLUGIN_HEALTHY_LINES if cluster.flavor == "generic" else [],
        "monitoring": _monitoring_summary(settings, monitoring),
        "sampleWorkloads": samples,
        "checks": checks,
    }


def _checks(settings: Settings) -> dict[str, str]:
    """Copy-paste commands that prove the GPUs are there after `pulumi up`."""
    cluster = settings.cluster
    return {
        "getCredentials": (
            f"gcloud container clusters get-credentials {cluster.name} "
            f"--location {cluster.location} --project {settings.project} --dns-endpoint"
        ),
        "allocatableGpus": (
            "kubectl get nodes -l cloud.google.com/gke-accelerator "
            f"-o custom-columns={ALLOCATABLE_GPUS_COLUMNS}"
        ),
        "devicePluginPods": GKE_DEVICE_PLUGIN_PODS,
        "gpuNodeEvents": (
            "kubectl get events -A --field-selector reason=TriggeredScaleUp,reason=NotTriggerScaleUp"
        ),
    }
