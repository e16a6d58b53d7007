"""The stack file's monitoring section (`gke-gpu:monitoring`), checked and resolved for the cluster: the
DCGM source and its scrape, and the alert policies, by the alerts' own rules (monitoring/rules.py, shared
with GpuMonitoring) and what only a stack file has (the GPU pools' drivers, MIG's idle signal)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic.alias_generators import to_camel

from ..cluster.model import ClusterConfig
from ..core.common import KeyNames, cut, listing
from ..core.section import SectionContext
from ..gpu.pool import GpuPool
from .model import AlertsConfig, MonitoringConfig
from .rules import check_notification_channels, check_xid_errors


def check_monitoring(
    m: MonitoringConfig,
    cluster: ClusterConfig,
    written: Sequence[tuple[int, GpuPool]],
    ctx: SectionContext,
    *,
    dashboard: bool,
    serving: bool,
) -> MonitoringConfig:
    """The monitoring section, resolved for the cluster: the DCGM source (managed on GKE, the exporter on a
    generic cluster), how the exporter is scraped and by whom, and the alerts (`written`: the shape-valid
    GPU pools with their index; `dashboard`: whether the dashboard is on, its default resolved;
    `serving`: the stack has model servers, which the backlog alert watches)."""
    prefix = ctx.key("monitoring")
    generic = cluster.mode == "existing" and cluster.flavor == "generic"
    dcgm = m.dcgm or ("exporter" if generic else "managed")
    if dcgm == "managed":
        if cluster.mode == "existing" and cluster.flavor == "generic":
            ctx.problems.add(
                f"{prefix}.dcgm",
                "'managed' is GKE's DCGM and needs a GKE cluster; on a generic cluster use "
                "'exporter' or 'none'",
            )
        for i, pool in written:
            if pool.driver_version == "INSTALLATION_DISABLED" and not cluster.autopilot:
                managed = f"{prefix}.dcgm managed{'' if m.dcgm else ' (the default)'}"
                # A draGpus pool must keep INSTALLATION_DISABLED (gpu/dra_rules.py): only DCGM can change.
                fix = (
                    f"set {prefix}.dcgm: none (or exporter); draGpus needs 'INSTALLATION_DISABLED'"
                    if pool.dra_gpus
                    else f"use DEFAULT or LATEST, or {prefix}.dcgm: exporter or none"
                )
                ctx.problems.add(
                    ctx.key(f"gpuPools[{i}].driverVersion"),
                    f"'INSTALLATION_DISABLED' is not allowed with {managed}: GKE's DCGM needs "
                    f"GKE-installed drivers; {fix}",
                )
    if dcgm == "exporter" and cluster.mode == "existing" and cluster.flavor == "gke":
        ctx.problems.add(
            f"{prefix}.dcgm",
            "'exporter' is not allowed on an existing GKE cluster: GKE runs its managed DCGM on "
            "every GPU node of clusters created at 1.32.1-gke.1357000 or later, and two DCGM engines "
            "per node give duplicate series; allowed: 'managed', 'none'",
        )
    if dcgm == "exporter" and cluster.autopilot:
        ctx.problems.add(
            f"{prefix}.dcgm",
            "'exporter' is not allowed on Autopilot (the exporter needs a privileged Pod and "
            "host paths, which Autopilot refuses); allowed: 'managed', 'none'",
        )
    scrape = m.scrape
    if scrape is not None:
        if dcgm != "exporter":
            ctx.problems.add(f"{prefix}.scrape", f"only allowed with dcgm: exporter (dcgm is {dcgm})")
        elif not generic and scrape != "podMonitoring":
            ctx.problems.add(
                f"{prefix}.scrape",
                f"{cut(scrape)} is not allowed on GKE, where Managed Prometheus scrapes through a "
                "PodMonitoring; allowed: 'podMonitoring'",
            )
    elif dcgm == "exporter":
        scrape = "serviceMonitor" if generic else "podMonitoring"

    if m.scraper_namespace is not None and dcgm != "exporter":
        ctx.problems.add(
            f"{prefix}.scraperNamespace",
            f"only allowed with dcgm: exporter (dcgm is {dcgm}); it is the namespace allowed to "
            "scrape the exporter",
        )
    a = m.alerts
    alerts = AlertsConfig()  # off
    if a.enabled and generic:
        ctx.problems.add(
            f"{prefix}.alerts.enabled",
            "true is not allowed on a generic cluster: the alert policies are Cloud Monitoring "
            "PromQL over Managed Service for Prometheus, and this cluster's exporter is scraped by "
            "your own Prometheus; alert there instead",
        )
    if a.enabled:
        if not a.notification_channels:
            ctx.problems.add(
                f"{prefix}.alerts.notificationChannels",
                "required when alerts.enabled is true: at least one "
                "projects/<project>/notificationChannels/<id>",
            )
        # GpuMonitoring's own rules (monitoring/rules.py), named as the stack file writes them.
        names = KeyNames(f"{prefix}.alerts", camel=True)
        check_xid_errors(names, ctx.problems, dcgm=dcgm, alerts=a, dcgm_key="dcgm")
        check_notification_channels(names, ctx.problems, alerts=a)
        if "serving_queue_backlog" in a.model_fields_set and not serving:
            ctx.problems.add(
                f"{prefix}.alerts.servingQueueBacklog",
                f"only allowed with {ctx.key('serving')} (the backlog alert watches the model servers)",
            )
        alerts = a.model_copy(update={"xid_errors": a.xid_errors and dcgm == "exporter"})
        _note_mig_idle_signal(written, prefix, dcgm, ctx)
    else:
        ignored = sorted(to_camel(k) for k in a.model_fields_set - {"enabled"})
        if ignored:
            ctx.problems.add(
                f"{prefix}.alerts",
                f"{listing(ignored)} would be ignored: alerts.enabled is not true, so no alert policy "
                "is created; set enabled: true or remove them",
            )
    scraper_namespace = None
    if dcgm == "exporter":
        scraper_namespace = m.scraper_namespace or ("monitoring" if generic else "gmp-system")
    # The same type, resolved: every default that depends on the cluster filled in.
    return m.model_copy(
        update={
            "dcgm": dcgm,
            "dashboard": dashboard,
            "alerts": alerts,
            "scrape": scrape,
            "scraper_namespace": scraper_namespace,
        }
    )


def _note_mig_idle_signal(
    written: Sequence[tuple[int, GpuPool]], prefix: str, dcgm: str, ctx: SectionContext
) -> None:
    """The idle-GPU alert judges a MIG instance by DCGM_FI_PROF_GR_ENGINE_ACTIVE (monitoring/
    alert_rules.py): say where that signal is not known to exist."""
    mig = [f"gpuPools[{i}]" for i, pool in written if pool.mig_partition_size]
    if not mig or dcgm == "exporter":
        return
    why = (
        "GKE's per-GPU duty cycle, which does not tell the instances apart (UNVERIFIED)"
        if dcgm == "none"
        else "DCGM_FI_PROF_GR_ENGINE_ACTIVE, which the exporter collects; whether GKE's managed DCGM "
        "exports it for MIG instances is UNVERIFIED"
    )
    ctx.notes.append(
        f"note: {prefix}.alerts: {listing(mig)} split GPUs with MIG; the idle alert judges their "
        f"instances by {why}, so an idle instance may not alert; dcgm: exporter gives each instance "
        "its own signal"
    )
