"""The composition root: typed settings in, components declared, stack outputs out.

`__main__.py` calls :func:`build` with the settings that `gke_gpu.stack.config.load_settings` validated;
the offline render and the tests call it the same way, through `__main__.py`, under mocks.
"""

from __future__ import annotations

from typing import Any

import pulumi

from ..cluster.existing import ExistingCluster, ExistingClusterArgs
from ..core import images
from ..core.image_digests import digests_for
from ..dra.claims import GPU_DEVICE_CLASS, is_rack
from ..dra.driver import DRA_DRIVER_NAMESPACE
from ..gpu.device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from ..gpu.node_labels import GpuNodeLabels
from ..gpu.scheduling import GPU_TOLERATION
from ..monitoring.dcgm_exporter_args import DcgmExporterSettings, DcgmFlavor, ScrapeMode
from ..workloads.samples_args import GpuTarget, TargetSharing
from .config import ConfigError, Settings
from .declare import Checked, checking_only, declare, declaring_checked
from .images_section import privileged_images_by_tag
from .pool_outputs import pool_summary
from .program_cluster import gke_cluster
from .program_dra import needs_dra_driver
from .program_fleet import fleet as declare_fleet
from .program_fleet import manager_membership
from .program_gpudirect import gpudirect_output
from .program_jobs import (
    cluster_jobs,
    declare_monitoring,
    declare_samples,
    monitoring_summary,
)
from .program_pools import gpu_layer
from .program_serving import serving

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

# A DRA pool's GPUs: one ResourceSlice per node of the driver, its devices the GPUs.
DRA_SLICE_COLUMNS = r"NODE:.spec.nodeName,DRIVER:.spec.driver,GPUS:.spec.devices[*].name"
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
    cluster, vpc = gke_cluster(settings, **manager_membership(settings))
    autopilot = settings.cluster.autopilot
    layer = gpu_layer(settings, cluster)
    pools = layer.pools
    monitoring = declare_monitoring(
        settings, pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})
    )
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
        "monitoring": monitoring_summary(settings, monitoring),
        "sampleWorkloads": samples,
        "checks": _checks(settings),
        **({"batchQueues": batch} if settings.batch.kueue else {}),
        **({"trainingData": data} if data else {}),
        **({"gpudirect": gpudirect_output(settings)} if layer.software else {}),
        # Node software run privileged or as root by a tag, not a digest (docs/security.md, "Images").
        "privilegedImagesByTag": privileged_images_by_tag(
            settings.gpu_pools,
            settings.monitoring,
            settings.device_plugin is not None,
            settings.image_digests,
            needs_dra_driver(settings),
        ),
        **({"serving": served} if served else {}),
        **fleet,
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
    monitoring = declare_monitoring(settings, kubernetes, exporter)
    samples, _ = declare_samples(settings, {EXISTING_TARGET: target}, existing.provider, layer)
    return {
        "clusterMode": "existing",
        "flavor": cluster.flavor,
        "clusterName": cluster.name or None,
        "project": settings.project,
        "gpuNodes": list(settings.gpu_nodes),
        "gpuNodeSelector": dict(target.get("node_selector", {}))
        or {"exists": list(target.get("required_node_labels", []))},
        "devicePluginHealthyLogLines": DEVICE_PLUGIN_HEALTHY_LINES if cluster.flavor == "generic" else [],
        "monitoring": monitoring_summary(settings, monitoring),
        "sampleWorkloads": samples,
        "checks": checks,
        "privilegedImagesByTag": privileged_images_by_tag(
            settings.gpu_pools,
            settings.monitoring,
            settings.device_plugin is not None,
            settings.image_digests,
            False,
        ),
    }


def _checks(settings: Settings) -> dict[str, str]:
    """Copy-paste commands that prove the GPUs are there after `pulumi up`, for the pools the stack
    has: GKE's device plugin advertises `nvidia.com/gpu` on its pools; a `draGpus` pool has none,
    its GPUs are the DRA driver's ResourceSlices, which the samples claim."""
    cluster = settings.cluster
    checks = {
        "getCredentials": (
            f"gcloud container clusters get-credentials {cluster.name} "
            f"--location {cluster.location} --project {settings.project} --dns-endpoint"
        ),
    }
    dra = sorted(p.name for p in settings.gpu_pools if p.dra_gpus)
    if not dra or len(dra) < len(settings.gpu_pools):
        selector = "cloud.google.com/gke-accelerator"
        if dra:
            selector = f"'{selector},cloud.google.com/gke-nodepool notin ({','.join(dra)})'"
        checks["allocatableGpus"] = (
            f"kubectl get nodes -l {selector} -o custom-columns={ALLOCATABLE_GPUS_COLUMNS}"
        )
        checks["devicePluginPods"] = GKE_DEVICE_PLUGIN_PODS
    if dra:
        checks["draResourceSlices"] = (
            f"kubectl get resourceslices --field-selector spec.driver={GPU_DEVICE_CLASS} "
            f"-o custom-columns={DRA_SLICE_COLUMNS}"
        )
        checks["draResourceClaims"] = "kubectl get resourceclaims -A -o wide"
    if needs_dra_driver(settings):
        checks["draDriverPods"] = f"kubectl get pods -n {DRA_DRIVER_NAMESPACE} -o wide"
    if any(is_rack(p.accelerator) for p in settings.gpu_pools):
        checks["computeDomains"] = "kubectl get computedomains -A"
    checks["gpuNodeEvents"] = (
        "kubectl get events -A --field-selector reason=TriggeredScaleUp,reason=NotTriggerScaleUp"
    )
    return checks
