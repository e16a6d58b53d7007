"""The composition root: typed settings in, components declared, stack outputs out.

`__main__.py` calls :func:`build` with the settings that `gke_gpu.stack.config.load_settings` validated;
the offline render and the tests call it the same way, through `__main__.py`, under mocks.
"""

from __future__ import annotations

from typing import Any

import pulumi

from ..core.common import ConfigError
from ..dra.plan import dra_checks, needs_dra_driver
from ..gpu.existing_plan import EXISTING_TARGET, plan_existing
from ..gpu.plan import gpu_checks, pool_summary
from ..monitoring.plan import existing_exporter, monitoring_summary
from ..workloads.samples_plan import existing_target
from .declare import Checked, checking_only, declare, declaring_checked
from .images_section import privileged_images_by_tag
from .program_cluster import cluster_plan, gke_cluster
from .program_jobs import cluster_jobs, declare_monitoring, declare_samples
from .program_pools import gpu_layer
from .settings import Settings


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
    membership: dict[str, Any] = {}
    if settings.fleet is not None:
        from .program_fleet import manager_membership

        membership = manager_membership(settings)
    cluster, vpc = gke_cluster(settings, **membership)
    autopilot = settings.cluster.autopilot
    layer = gpu_layer(settings, cluster)
    pools = layer.pools
    monitoring = declare_monitoring(
        settings, pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})
    )
    jobs = cluster_jobs(settings, cluster.provider, layer)
    samples, batch, data = jobs.samples, jobs.batch, jobs.data
    served: dict[str, Any] = {}
    if settings.serving:
        # Imported here: a stack without model servers does not pay for their modules.
        from .program_serving import serving

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
        "monitoring": monitoring_summary(settings.monitoring, monitoring),
        "sampleWorkloads": samples,
        "checks": _checks(settings),
        **({"batchQueues": batch} if settings.batch.kueue else {}),
        **({"trainingData": data} if data else {}),
        **({"gpudirect": layer.gpudirect.output()} if layer.software else {}),
        # Node software run privileged or as root by a tag, not a digest (docs/security.md, "Images").
        "privilegedImagesByTag": privileged_images_by_tag(
            settings.gpu_pools,
            settings.monitoring,
            settings.device_plugin is not None,
            settings.image_digests,
            needs_dra_driver(settings.gpu_pools, standard=settings.cluster.mode == "standard"),
        ),
        **({"serving": served} if served else {}),
        **fleet,
    }


def _build_existing(settings: Settings) -> dict[str, Any]:
    """The GPU layer on a cluster the program does not manage (GKE of another team, or generic), as
    its plan gives it (gpu/existing_plan.py)."""
    from ..cluster.existing import ExistingCluster, ExistingClusterArgs

    cluster = settings.cluster
    assert cluster.kubeconfig is not None
    existing_args: ExistingClusterArgs = {"kubeconfig": cluster.kubeconfig}
    if cluster.context is not None:
        existing_args["context"] = cluster.context
    existing = declare(ExistingCluster, "cluster", existing_args, section="cluster")
    kubernetes = pulumi.ResourceOptions(providers={"kubernetes": existing.provider})
    plugin = settings.device_plugin if cluster.flavor == "generic" else None
    gpu = plan_existing(plugin, settings.gpu_nodes, settings.image_digests)
    layer: list[pulumi.Resource] = []
    if gpu.labels is not None:
        from ..gpu.node_labels import GpuNodeLabels

        layer.append(declare(GpuNodeLabels, "gpu-nodes", gpu.labels, opts=kubernetes, section="gpuNodes"))
    if gpu.plugin is not None:
        from ..gpu.device_plugin import NvidiaDevicePlugin

        # After the labels: the plugin's Pods only land on labelled nodes.
        opts = pulumi.ResourceOptions(providers={"kubernetes": existing.provider}, depends_on=list(layer))
        layer.append(
            declare(NvidiaDevicePlugin, "device-plugin", gpu.plugin, opts=opts, section="devicePlugin")
        )
    monitoring = declare_monitoring(settings, kubernetes, existing_exporter(settings.monitoring, gpu))
    targets = {EXISTING_TARGET: existing_target(gpu)}
    samples, _ = declare_samples(settings, targets, existing.provider, layer)
    return {
        "clusterMode": "existing",
        "flavor": cluster.flavor,
        "clusterName": cluster.name or None,
        "project": settings.project,
        "gpuNodes": list(settings.gpu_nodes),
        "gpuNodeSelector": gpu.selector_output(),
        "devicePluginHealthyLogLines": gpu.healthy_log_lines,
        "monitoring": monitoring_summary(settings.monitoring, monitoring),
        "sampleWorkloads": samples,
        "checks": dict(gpu.checks),
        "privilegedImagesByTag": privileged_images_by_tag(
            settings.gpu_pools,
            settings.monitoring,
            settings.device_plugin is not None,
            settings.image_digests,
            False,
        ),
    }


def _checks(settings: Settings) -> dict[str, str]:
    """Copy-paste commands that prove the GPUs are there after `pulumi up`: the cluster's credentials,
    then its pools' (gpu/plan.py) and the DRA driver's (dra/plan.py)."""
    standard = settings.cluster.mode == "standard"
    return {
        "getCredentials": cluster_plan(settings).get_credentials(),
        **gpu_checks(settings.gpu_pools, dra_checks(settings.gpu_pools, standard=standard)),
    }
