"""What a cluster runs on its GPU pools, declared from its domains' plans for the stack's own cluster
(`program.build`) and for each fleet worker (`program_fleet`): the samples, Kueue with the teams' queues,
the all-reduce tests, the DRANET claim templates, the teams' training data, and GPU monitoring."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import pulumi

from ..monitoring.plan import (
    MonitoredCluster,
    MonitoringSummary,
    gke_exporter,
    monitoring_args,
    monitoring_summary,
)
from ..workloads.batch_plan import (
    PoolQueues,
    TeamDataSummary,
    dranet_namespaces,
    nccl_tests,
    plan_batch,
    training_data,
)
from ..workloads.samples_plan import SAMPLES_NAMESPACE, gpu_target, samples_args
from .declare import declare
from .program_pools import GpuLayer
from .settings import Settings

if TYPE_CHECKING:
    from ..monitoring.dcgm_exporter_args import DcgmExporterSettings
    from ..monitoring.gpu_monitoring import GpuMonitoring
    from ..workloads.samples_args import GpuTarget


# How to wait for each sample and read its log (the stack output `sampleWorkloads`): a sample's
# commands, or an all-reduce test's (an Output).
Commands = dict[str, "dict[str, str] | pulumi.Output[dict[str, str]]"]


class ClusterJobs(NamedTuple):
    """What a cluster runs on its GPU pools, as stack outputs (`sampleWorkloads`, `batchQueues`,
    `trainingData`), and its Kueue component (None without `batch.kueue`)."""

    samples: Commands
    batch: list[PoolQueues]
    data: dict[str, TeamDataSummary]
    queues: pulumi.Resource | None


def cluster_jobs(
    settings: Settings,
    provider: pulumi.ProviderResource,
    layer: GpuLayer,
    prefix: str = "",
    *,
    pods_ready_timeout_minutes: int | None = None,
) -> ClusterJobs:
    """Declare the samples, Kueue with the teams' queues, the all-reduce tests, the DRANET claim
    templates and the teams' training data of a cluster (a fleet worker's: `prefix`, and its Kueue's
    `waitForPodsReady` timeout)."""
    pools, software, driver = layer.pools, layer.software, layer.driver
    # The namespaces the admission policies confine are made only once the policies exist.
    guards = layer.guards
    autopilot = settings.cluster.autopilot
    targets = {pool.name: gpu_target(pool, autopilot=autopilot) for pool in settings.gpu_pools}
    samples, samples_component = declare_samples(
        settings, targets, provider, [*pools.values(), *([driver] if driver else [])], prefix
    )
    if not settings.batch.kueue:
        return ClusterJobs(samples, [], {}, None)
    from ..workloads.batch_queues import GpuBatchQueues

    batch = plan_batch(
        settings.batch,
        settings.gpu_pools,
        settings.workloads,
        local_queue_namespace=SAMPLES_NAMESPACE if samples_component else None,
        pods_ready_timeout_minutes=pods_ready_timeout_minutes,
    )
    queues = declare(
        GpuBatchQueues,
        f"{prefix}batch",
        batch.args,
        opts=pulumi.ResourceOptions(
            provider=provider,
            depends_on=[*pools.values(), *([samples_component] if samples_component else []), *guards],
        ),
        section="batch",
        section_checked=True,
    )
    # After Kueue, JobSet and the pool's ClusterQueue (the CRDs and the webhook) and, with GPUDirect,
    # the flavour's Networks and NCCL plugin.
    after = [queues, *software, *guards, *([driver] if driver else [])]
    for args in nccl_tests(settings.workloads, settings.gpu_pools, settings.batch):
        from ..workloads.nccl_allreduce import NcclAllReduce

        test = declare(
            NcclAllReduce,
            f"{prefix}nccl-{args['pool']}",
            args,
            opts=pulumi.ResourceOptions(provider=provider, depends_on=after),
            section="workloads",
        )
        samples[f"nccl-allreduce-{args['pool']}"] = test.commands
    if namespaces := dranet_namespaces(settings.batch, settings.gpu_pools):
        from ..gpudirect.dranet import DranetClaimTemplates

        # Where the teams' JobSets on DRANET pools claim the RDMA NICs, after the team namespaces.
        declare(
            DranetClaimTemplates,
            f"{prefix}gpudirect-dranet",
            {"namespaces": namespaces, "nic_counts": layer.gpudirect.nic_counts()},
            opts=pulumi.ResourceOptions(provider=provider, depends_on=[queues]),
            section="gpuPools",
        )
    data: dict[str, TeamDataSummary] = {}
    planned = training_data(
        settings.batch,
        settings.gpu_pools,
        project=settings.project or "",
        cluster_name=settings.cluster.name or "",
    )
    for team in planned:
        from ..workloads.training_data import TrainingData

        declare(
            TrainingData,
            f"{prefix}data-{team.team}",
            team.args,
            opts=pulumi.ResourceOptions(provider=provider, depends_on=[queues]),
            # The batch section's rules checked the team's volumes (workloads/training_data_rules.py).
            section="batch",
            section_checked=True,
        )
        data[team.team] = team.summary
    return ClusterJobs(samples, batch.summary, data, queues)


def declare_monitoring(
    settings: Settings,
    kubernetes: pulumi.ResourceOptions,
    exporter: DcgmExporterSettings | None = None,
    prefix: str = "",
) -> GpuMonitoring | None:
    """The monitoring component; `exporter` says where the exporter runs (default: the GKE pools)."""
    m = settings.monitoring
    fleet = settings.fleet
    cluster = MonitoredCluster(
        project=settings.project,
        cluster_name=settings.cluster.name,
        serving=bool(settings.serving),
        fleet_workers=[(w.name, w.settings.cluster.name or w.name) for w in fleet.workers] if fleet else (),
        image_digests=settings.image_digests,
    )
    if m.dcgm == "exporter" and exporter is None:
        exporter = gke_exporter(m, settings.gpu_pools, autopilot=settings.cluster.autopilot)
    args = monitoring_args(m, cluster, exporter)
    if args is None:
        return None
    from ..monitoring.gpu_monitoring import GpuMonitoring

    return declare(
        GpuMonitoring,
        f"{prefix}monitoring",
        args,
        opts=kubernetes,
        section="monitoring",
        section_checked=True,
    )


def cluster_monitoring(
    settings: Settings, provider: pulumi.ProviderResource, prefix: str
) -> MonitoringSummary:
    """A fleet worker's GPU monitoring, as `build` declares a cluster's (its resource names prefixed);
    returns its summary."""
    kubernetes = pulumi.ResourceOptions(providers={"kubernetes": provider})
    return monitoring_summary(settings.monitoring, declare_monitoring(settings, kubernetes, prefix=prefix))


def declare_samples(
    settings: Settings,
    targets: dict[str, GpuTarget],
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    prefix: str = "",
) -> tuple[Commands, pulumi.Resource | None]:
    """Declare the opted-in samples; return, per sample, how to wait for it and read its log (and
    the component, whose namespace the batch queues' LocalQueues use)."""
    args = samples_args(settings.workloads, targets)
    if args is None:
        return {}, None
    from ..workloads.samples import SampleWorkloads

    samples = declare(
        SampleWorkloads,
        f"{prefix}samples",
        args,
        # The GPU pools, ComputeClasses or device plugin first, so no sample waits on nothing.
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
        section="workloads",
    )
    return dict(samples.commands), samples
