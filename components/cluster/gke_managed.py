"""What the cluster holds of GKE's own behaviour, as the provider's inputs: the monitoring packages
(GKE's defaults kept, DCGM added) and the maintenance policy (cluster/maintenance.py's model).

GKE's monitoring packages. `monitoringConfig.componentConfig.enableComponents` is one list: what it
names is on, the rest off ("the set of values given to --monitoring replaces any earlier setting",
GKE "cAdvisor/Kubelet metrics" page, gcloud section), so naming only SYSTEM_COMPONENTS and DCGM turned
off packages GKE enables by default. GKE's defaults for a new cluster, each with its page:

* SYSTEM_COMPONENTS: always (GKE "Configure metrics collection", system metrics are required when
  metrics go to Cloud Monitoring).
* the kube state package, STORAGE, POD, DEPLOYMENT, STATEFULSET, DAEMONSET and HPA: on by default
  for Standard clusters from 1.29.2-gke.2000 and Autopilot from 1.27.4-gke.900 (GKE "Collect and view
  kube state metrics", Requirements; read in the Spanish copy of the page: UNVERIFIED in English);
  JOBSET joins it by default from 1.32.1-gke.1357001 (same page, English copy).
* CADVISOR and KUBELET: on by default for clusters created at 1.29.3-gke.1093000 or later (GKE
  "Collect and view cAdvisor/Kubelet metrics", Requirements).
* DCGM: by default on GPU clusters created at 1.32.1-gke.1357000 or later (the project's earlier
  note in gke_cluster.py); added here when `managed_dcgm`, left out otherwise.

The provider's schema (pulumi_gcp 10.2.0 `ClusterMonitoringConfigArgs.enable_components`) lists
these values and the gates of KUBELET, CADVISOR (1.29.3-gke.1093000) and JOBSET (1.32.1-gke.1357001).
A package whose gate is above the cluster's `minimum_version` is left out (GKE would not have it
on by default there either). Changing the list is an in-place update; each added package ingests
more Managed Service for Prometheus samples (billed per sample; the packages' volumes UNVERIFIED).
"""

from __future__ import annotations

from pulumi_gcp import container

from ..core.gke_version import below
from .maintenance import zulu
from .model import MaintenanceConfig

# GKE's default packages for a new cluster, each with the first version that has it on by default
# (None: every supported version).
DEFAULT_MONITORING_COMPONENTS: tuple[tuple[str, str | None], ...] = (
    ("SYSTEM_COMPONENTS", None),
    ("STORAGE", "1.29.2-gke.2000"),
    ("POD", "1.29.2-gke.2000"),
    ("DEPLOYMENT", "1.29.2-gke.2000"),
    ("STATEFULSET", "1.29.2-gke.2000"),
    ("DAEMONSET", "1.29.2-gke.2000"),
    ("HPA", "1.29.2-gke.2000"),
    ("JOBSET", "1.32.1-gke.1357001"),
    ("CADVISOR", "1.29.3-gke.1093000"),
    ("KUBELET", "1.29.3-gke.1093000"),
)


def monitoring_components(*, managed_dcgm: bool, minimum_version: str | None) -> list[str]:
    """GKE's default packages (those its version has by default), plus DCGM when asked for."""
    components = [
        name
        for name, since in DEFAULT_MONITORING_COMPONENTS
        if since is None or minimum_version is None or not below(minimum_version, since)
    ]
    return [*components, "DCGM"] if managed_dcgm else components


def maintenance_policy(
    maintenance: MaintenanceConfig | None,
) -> container.ClusterMaintenancePolicyArgs | None:
    """The cluster's maintenance policy, or None when the settings have none (GKE's own: any time).
    Times are sent in UTC, as GKE returns them, so a preview after `pulumi up` shows no change."""
    if maintenance is None or (maintenance.daily_window_start is None and not maintenance.exclusions):
        return None
    return container.ClusterMaintenancePolicyArgs(
        daily_maintenance_window=container.ClusterMaintenancePolicyDailyMaintenanceWindowArgs(
            start_time=maintenance.daily_window_start
        )
        if maintenance.daily_window_start
        else None,
        maintenance_exclusions=[
            container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                exclusion_name=exclusion.name,
                start_time=zulu(exclusion.start),
                end_time=zulu(exclusion.end) if exclusion.end else None,
                exclusion_options=container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                    scope=exclusion.scope,
                    end_time_behavior="UNTIL_END_OF_SUPPORT" if exclusion.until_end_of_support else None,
                ),
            )
            for exclusion in maintenance.exclusions
        ]
        or None,
    )
