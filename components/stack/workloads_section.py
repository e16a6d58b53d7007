"""Pass 2 rules for monitoring, sample workloads and the GPU layer of an existing cluster."""

from __future__ import annotations

from pydantic.alias_generators import to_camel

from ..cluster.model import ClusterConfig
from ..core.common import (
    DNS_SUBDOMAIN,
    LABEL_VALUE_PATTERN,
    KeyNames,
    cut,
    listing,
    valid_label_key,
)
from ..core.images import BLACKWELL_ACCELERATORS
from ..dra.claims import is_rack
from ..gpu.device_plugin_config import DevicePluginConfig
from ..gpu.pool import GpuPool
from ..monitoring.model import AlertsConfig, MonitoringConfig
from ..monitoring.rules import check_notification_channels, check_xid_errors
from ..workloads.model import WorkloadConfig
from .schema import RuleBase, dashboard_on

# Samples whose image has no linux/arm64 build (pytorch/pytorch publishes amd64 only:
# pytorch/pytorch issues 145716 and 157139, still open 2026-11).
AMD64_ONLY_WORKLOADS = {
    "pytorch-smoke": "pytorch/pytorch",
    # Google's NCCL test images (the gIB diagnostic image, the TCPX/TCPXO plugin images) are amd64
    # builds; their Arm builds are separate images (nccl_allreduce_args.RUNNERS).
    "nccl-allreduce": "us-docker.pkg.dev/gce-ai-infra NCCL test images",
}
# nccl-allreduce's node count when a workload leaves `nodes` out.
NCCL_DEFAULT_NODES = 2


class WorkloadRules(RuleBase):
    def _monitoring(self, cluster: ClusterConfig, pools: tuple[GpuPool, ...]) -> MonitoringConfig:
        m = self.config.monitoring
        prefix = f"{self.root}monitoring"
        generic = cluster.mode == "existing" and cluster.flavor == "generic"
        dcgm = m.dcgm or ("exporter" if generic else "managed")
        if dcgm == "managed":
            if cluster.mode == "existing" and cluster.flavor == "generic":
                self.problems.add(
                    f"{prefix}.dcgm",
                    "'managed' is GKE's DCGM and needs a GKE cluster; on a generic cluster use "
                    "'exporter' or 'none'",
                )
            for i, pool in self.indexed_pools():
                if pool.driver_version == "INSTALLATION_DISABLED" and not cluster.autopilot:
                    managed = f"{prefix}.dcgm managed{'' if m.dcgm else ' (the default)'}"
                    # A draGpus pool must keep INSTALLATION_DISABLED (gpu/dra_rules.py): only DCGM can change.
                    fix = (
                        f"set {prefix}.dcgm: none (or exporter); draGpus needs 'INSTALLATION_DISABLED'"
                        if pool.dra_gpus
                        else f"use DEFAULT or LATEST, or {prefix}.dcgm: exporter or none"
                    )
                    self.problems.add(
                        f"{self.root}gpuPools[{i}].driverVersion",
                        f"'INSTALLATION_DISABLED' is not allowed with {managed}: GKE's DCGM needs "
                        f"GKE-installed drivers; {fix}",
                    )
        if dcgm == "exporter" and cluster.mode == "existing" and cluster.flavor == "gke":
            self.problems.add(
                f"{prefix}.dcgm",
                "'exporter' is not allowed on an existing GKE cluster: GKE runs its managed DCGM on "
                "every GPU node of clusters created at 1.32.1-gke.1357000 or later, and two DCGM engines "
                "per node give duplicate series; allowed: 'managed', 'none'",
            )
        if dcgm == "exporter" and cluster.autopilot:
            self.problems.add(
                f"{prefix}.dcgm",
                "'exporter' is not allowed on Autopilot (the exporter needs a privileged Pod and "
                "host paths, which Autopilot refuses); allowed: 'managed', 'none'",
            )
        scrape = m.scrape
        if scrape is not None:
            if dcgm != "exporter":
                self.problems.add(f"{prefix}.scrape", f"only allowed with dcgm: exporter (dcgm is {dcgm})")
            elif not generic and scrape != "podMonitoring":
                self.problems.add(
                    f"{prefix}.scrape",
                    f"{cut(scrape)} is not allowed on GKE, where Managed Prometheus scrapes through a "
                    "PodMonitoring; allowed: 'podMonitoring'",
                )
        elif dcgm == "exporter":
            scrape = "serviceMonitor" if generic else "podMonitoring"

        if m.scraper_namespace is not None and dcgm != "exporter":
            self.problems.add(
                f"{prefix}.scraperNamespace",
                f"only allowed with dcgm: exporter (dcgm is {dcgm}); it is the namespace allowed to "
                "scrape the exporter",
            )
        a = m.alerts
        alerts = AlertsConfig()  # off
        if a.enabled and generic:
            self.problems.add(
                f"{prefix}.alerts.enabled",
                "true is not allowed on a generic cluster: the alert policies are Cloud Monitoring "
                "PromQL over Managed Service for Prometheus, and this cluster's exporter is scraped by "
                "your own Prometheus; alert there instead",
            )
        if a.enabled:
            if not a.notification_channels:
                self.problems.add(
                    f"{prefix}.alerts.notificationChannels",
                    "required when alerts.enabled is true: at least one "
                    "projects/<project>/notificationChannels/<id>",
                )
            # GpuMonitoring's own rules (monitoring/rules.py), named as the stack file writes them.
            names = KeyNames(f"{prefix}.alerts", camel=True)
            check_xid_errors(names, self.problems, dcgm=dcgm, alerts=a, dcgm_key="dcgm")
            check_notification_channels(names, self.problems, alerts=a)
            if "serving_queue_backlog" in a.model_fields_set and not self.config.serving:
                self.problems.add(
                    f"{prefix}.alerts.servingQueueBacklog",
                    f"only allowed with {self.root}serving (the backlog alert watches the model servers)",
                )
            alerts = a.model_copy(update={"xid_errors": a.xid_errors and dcgm == "exporter"})
            self._note_mig_idle_signal(prefix, dcgm)
        else:
            ignored = sorted(to_camel(k) for k in a.model_fields_set - {"enabled"})
            if ignored:
                self.problems.add(
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
                "dashboard": dashboard_on(self.config),
                "alerts": alerts,
                "scrape": scrape,
                "scraper_namespace": scraper_namespace,
            }
        )

    def _note_mig_idle_signal(self, prefix: str, dcgm: str) -> None:
        """The idle-GPU alert judges a MIG instance by DCGM_FI_PROF_GR_ENGINE_ACTIVE (monitoring/
        alert_rules.py): say where that signal is not known to exist."""
        mig = [f"gpuPools[{i}]" for i, pool in self.indexed_pools() if pool.mig_partition_size]
        if not mig or dcgm == "exporter":
            return
        why = (
            "GKE's per-GPU duty cycle, which does not tell the instances apart (UNVERIFIED)"
            if dcgm == "none"
            else "DCGM_FI_PROF_GR_ENGINE_ACTIVE, which the exporter collects; whether GKE's managed DCGM "
            "exports it for MIG instances is UNVERIFIED"
        )
        self.warnings.append(
            f"note: {prefix}.alerts: {listing(mig)} split GPUs with MIG; the idle alert judges their "
            f"instances by {why}, so an idle instance may not alert; dcgm: exporter gives each instance "
            "its own signal"
        )

    def _workloads(self, cluster: ClusterConfig, pools: tuple[GpuPool, ...]) -> tuple[WorkloadConfig, ...]:
        result: list[WorkloadConfig] = []
        names = [p.name for p in pools]
        seen: set[tuple[str, str | None]] = set()
        on_pools = [w for w in self.config.workloads if w.name != "serving-load"]
        if cluster.mode != "existing" and on_pools:
            if "gpuPools" in self.broken.sections:
                return ()  # the pools' own problem is reported; which pool a sample lands on is unknown
            if not self.config.gpu_pools and not self.broken.any_pool():
                self.problems.add(
                    f"{self.root}workloads",
                    f"{listing(w.name for w in on_pools)} "
                    f"{'needs' if len(on_pools) == 1 else 'need'} a GPU pool, and "
                    f"{self.root}gpuPools is empty",
                )
                return ()
        loaded: set[str] = set()
        for i, w in self.indexed_workloads():
            path = f"{self.root}workloads[{i}]"
            if w.name == "serving-load":
                if self._serving_load(w, path, cluster, loaded):
                    result.append(w)
                continue
            for key in ("service", "floors"):
                if getattr(w, key) is not None:
                    self.problems.add(f"{path}.{key}", f"only allowed for serving-load (name is {w.name})")
            if w.name == "nccl-allreduce":
                if not self._nccl_queued(cluster, path):
                    continue
            elif w.nodes is not None:
                self.problems.add(f"{path}.nodes", f"only allowed for nccl-allreduce (name is {w.name})")
            if cluster.mode == "existing":
                if w.pool is not None:
                    self.problems.add(
                        f"{path}.pool",
                        "not allowed with cluster.mode existing: workloads land on any GPU node",
                    )
                pool = None
            else:
                declared = [p.name for p in self.config.gpu_pools]
                if w.pool is None and (self.broken.pool_indexes[:1] != [0]):
                    continue  # the default is the first pool, which failed its own checks
                pool_name = w.pool or declared[0]
                if pool_name in self.broken.pools or (w.pool and self.broken.unnamed_pools):
                    continue  # that pool's own problems are reported; judging the workload would guess
                if pool_name not in names:
                    self.problems.add(
                        f"{path}.pool",
                        f"{cut(pool_name)} is not a GPU pool of this stack; allowed: {listing(names)}",
                    )
                    continue
                pool_obj = next(p for p in pools if p.name == pool_name)
                # nccl-allreduce is queued by Kueue, which asks for a queued pool's nodes (its
                # ProvisioningRequest); the other samples are plain Jobs that would wait forever.
                if pool_obj.queued_provisioning and w.name != "nccl-allreduce":
                    self.problems.add(
                        f"{path}.pool",
                        f"{cut(pool_name)} uses queued provisioning, whose nodes come only through a "
                        "ProvisioningRequest; choose a pool without queuedProvisioning",
                    )
                    continue
                if (
                    w.name == "pytorch-smoke"
                    and pool_obj.accelerator in BLACKWELL_ACCELERATORS
                    and pool_obj.driver_version != "LATEST"
                ):
                    self.problems.add(
                        f"{path}.pool",
                        f"{cut(pool_name)} ({pool_obj.accelerator}) runs pytorch-smoke on the CUDA 13 "
                        "build of PyTorch (Blackwell needs it), which needs an R580+ driver: set the pool's "
                        "driverVersion: LATEST",
                    )
                    continue
                arch = self.catalog.accelerators[pool_obj.accelerator].arch
                # A rack's all-reduce runs over NVLink in the Arm build of Google's test image (with or
                # without the rack's RDMA NICs: cluster-toolkit's examples/gke-a4x claims both).
                arm_build = w.name == "nccl-allreduce" and is_rack(pool_obj.accelerator)
                if w.name in AMD64_ONLY_WORKLOADS and arch != "amd64" and not arm_build:
                    self.problems.add(
                        f"{path}.pool",
                        f"{cut(pool_name)} ({pool_obj.accelerator}) has {arch} hosts, and {w.name}'s image "
                        f"({AMD64_ONLY_WORKLOADS[w.name]}) is published for amd64 only; choose another "
                        "pool or leave this sample out",
                    )
                    continue
                if w.name == "nccl-allreduce" and not self._nccl_pool(w, path, pool_obj):
                    continue
                if w.name == "sharing-demo" and pool_obj.sharing is None:
                    self.problems.add(
                        f"{path}.pool",
                        f"{cut(pool_name)} has no sharing; sharing-demo needs a pool with "
                        "sharing (TIME_SHARING or MPS); pools with sharing: "
                        + listing(p.name for p in pools if p.sharing),
                    )
                    continue
                pool = pool_name
            if w.name == "sharing-demo" and cluster.mode == "existing":
                if self.flavor_unknown or "devicePlugin" in self.broken.sections:
                    continue  # judged once the flavor and the device plugin's settings are valid
                plugin = self.config.device_plugin
                if cluster.flavor != "generic" or not (plugin and plugin.sharing):
                    self.problems.add(
                        f"{path}.name",
                        "'sharing-demo' on an existing cluster needs flavor generic with "
                        "devicePlugin.sharing.timeSlicing",
                    )
                    continue
            if w.replicas is not None and w.name != "sharing-demo":
                self.problems.add(f"{path}.replicas", "only allowed for sharing-demo")
            if (w.name, pool) in seen:
                self.problems.add(f"{path}", f"{cut(w.name)} on pool {cut(pool)} is listed twice")
            seen.add((w.name, pool))
            resolved: dict[str, object] = {"pool": pool}
            if w.name == "nccl-allreduce":
                resolved["nodes"] = w.nodes or NCCL_DEFAULT_NODES
            result.append(w.model_copy(update=resolved))
        return tuple(result)

    def _serving_load(self, w: WorkloadConfig, path: str, cluster: ClusterConfig, loaded: set[str]) -> bool:
        """serving-load names a service of gke-gpu:serving and nothing of a sample's. False (reported,
        unless the serving section's own problems explain it) when it cannot run."""
        usable = True
        for key, value in (("pool", w.pool), ("replicas", w.replicas), ("nodes", w.nodes)):
            if value is not None:
                usable = False
                self.problems.add(
                    f"{path}.{key}",
                    "not allowed for serving-load: it loads the service named by `service`, from a CPU "
                    "node, on the service's own pool and replicas",
                )
        services = [s.name for s in self.config.serving]
        if w.service is None:
            self.problems.add(
                f"{path}.service",
                f"required for serving-load: the {self.root}serving entry to load"
                + (f"; services: {listing(services)}" if services else ""),
            )
            return False
        if w.service not in services:
            serving_broken = "serving" in self.broken.sections or any(
                k.startswith("serving[") for k in self.broken.sections
            )
            if not serving_broken:
                self.problems.add(
                    f"{path}.service",
                    f"{cut(w.service)} is not a service of {self.root}serving"
                    + (f"; services: {listing(services)}" if services else " (the section is empty)"),
                )
            return False
        if w.service in loaded:
            self.problems.add(
                f"{path}.service", f"{cut(w.service)} is already loaded by another serving-load"
            )
            return False
        loaded.add(w.service)
        # On an existing cluster the serving section refuses the service itself.
        return usable and cluster.mode != "existing"

    def _nccl_queued(self, cluster: ClusterConfig, path: str) -> bool:
        """nccl-allreduce's JobSet is queued by Kueue (which also brings JobSet's CRD): a Standard
        cluster with gke-gpu:batch.kueue. False (reported, unless batch is broken) when not."""
        if cluster.mode != "standard":
            self.problems.add(
                f"{path}.name",
                f"'nccl-allreduce' is not allowed with cluster.mode {cluster.mode}: Kueue queues its JobSet "
                f"on a queue of one of this stack's Standard GPU pools ({self.root}batch.kueue)",
            )
            return False
        if "batch" in self.broken.sections:
            return False  # the batch section's own problem is reported
        if not self.config.batch.kueue:
            self.problems.add(
                f"{path}.name",
                f"'nccl-allreduce' needs {self.root}batch.kueue: true: Kueue admits its JobSet (all its "
                "nodes at once) and installs JobSet, whose CRD the test needs",
            )
            return False
        return True

    def _nccl_pool(self, w: WorkloadConfig, path: str, pool: GpuPool) -> bool:
        """nccl-allreduce's pool: whole GPUs (each Pod takes every GPU of its node) and room for its
        nodes. False (reported) when not."""
        if pool.sharing or pool.mig_partition_size:
            how = (
                f"shares its GPUs (sharing {pool.sharing.strategy})"
                if pool.sharing
                else f"splits its GPUs (migPartitionSize {pool.mig_partition_size})"
            )
            self.problems.add(
                f"{path}.pool",
                f"{cut(pool.name)} {how}; nccl-allreduce takes every whole GPU of each of its nodes: "
                "choose a pool without sharing or MIG",
            )
            return False
        nodes = w.nodes or NCCL_DEFAULT_NODES
        if pool.max_nodes is not None and nodes > pool.max_nodes:
            given = "" if w.nodes else " (the default)"
            self.problems.add(
                f"{path}.nodes",
                f"{nodes}{given} is more than the maxNodes {pool.max_nodes} of pool {cut(pool.name)}: the "
                "all-reduce needs that many nodes at once",
            )
            return False
        return True

    def _existing_gpu_layer(
        self, cluster: ClusterConfig
    ) -> tuple[DevicePluginConfig | None, tuple[str, ...]]:
        cfg = self.config
        generic = cluster.mode == "existing" and cluster.flavor == "generic"
        if not generic:
            for key in ("device_plugin", "gpu_nodes"):
                if key in cfg.model_fields_set:
                    self.problems.add(
                        f"{self.root}{to_camel(key)}",
                        "only allowed with cluster.mode existing and cluster.flavor generic "
                        "(GKE ships its own device plugin and labels its GPU nodes)",
                    )
            return None, ()
        plugin = cfg.device_plugin or DevicePluginConfig()
        label = plugin.gpu_node_label
        key, _, value = label.partition("=")
        if (
            "=" not in label
            or not key
            or not valid_label_key(key)
            or not LABEL_VALUE_PATTERN.fullmatch(value)
        ):
            self.problems.add(
                f"{self.root}devicePlugin.gpuNodeLabel",
                f"{cut(label)} is not a Kubernetes label selector of the form key=value (e.g. "
                "nvidia.com/gpu.present=true or gpus=true)",
            )
        nodes = tuple(cfg.gpu_nodes or ())
        for j, node in enumerate(nodes):
            if not DNS_SUBDOMAIN.fullmatch(node) or len(node) > 253:
                self.problems.add(f"{self.root}gpuNodes[{j}]", f"{cut(node)} is not a Kubernetes node name")
        if len(set(nodes)) != len(nodes):
            self.problems.add(f"{self.root}gpuNodes", "lists a node twice")
        return plugin, nodes
