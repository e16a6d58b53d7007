"""The monitoring section (the stack file's `gke-gpu:monitoring`) and the alert policies' settings."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from ..core.arg_types import enum_values
from ..core.common import (
    MAX_CHANNELS_PER_POLICY,
)
from ..core.model import (
    CHANNEL,
    DNS_LABEL,
    StackModel,
    example,
)


class DcgmSource(StrEnum):
    """Where the DCGM metrics come from."""

    MANAGED = "managed"
    """GKE's managed DCGM (switched on in the cluster: GkeCluster's `managed_dcgm`)."""
    EXPORTER = "exporter"
    """The self-managed DCGM exporter this component declares (`exporter`)."""
    NONE = "none"
    """No DCGM: GKE's built-in accelerator metrics only."""


class ScrapeMode(StrEnum):
    """What scrapes the exporter's metrics."""

    POD_MONITORING = "podMonitoring"
    """A PodMonitoring: Google Cloud Managed Service for Prometheus."""
    SERVICE_MONITOR = "serviceMonitor"
    """A ServiceMonitor: the Prometheus Operator."""
    ANNOTATIONS = "annotations"
    """prometheus.io/* annotations on the Service, for annotation-based scrapers."""


class AlertPolicyConfig(StackModel):
    """The alert policies' settings: the stack file's `monitoring.alerts` and GpuMonitoring's `alerts`."""

    notification_channels: Annotated[
        list[Annotated[str, Field(max_length=200, pattern=CHANNEL)]],
        Field(max_length=MAX_CHANNELS_PER_POLICY),
    ] = []
    idle_gpu_minutes: int = Field(120, ge=5, le=1440)
    idle_gpu_utilization_percent: float = Field(5, ge=0, le=100)
    xid_errors: bool = True
    # With model servers (gke-gpu:serving): requests waiting per server, averaged over 5 minutes, above
    # which for 10 minutes the serving alert fires.
    serving_queue_backlog: int = Field(10, ge=1, le=100_000)


class AlertsConfig(AlertPolicyConfig):
    model_config = example(enabled=True, idleGpuMinutes=120)

    enabled: bool = False


class MonitoringConfig(StackModel):
    model_config = example(dcgm="managed", dashboard=True)

    # Defaults depend on the cluster: managed and a dashboard on GKE; the exporter and no Cloud
    # Monitoring dashboard on a generic cluster.
    dcgm: enum_values(DcgmSource) | None = None  # type: ignore[valid-type]
    dashboard: bool | None = None
    alerts: AlertsConfig = AlertsConfig.model_construct()
    scrape: enum_values(ScrapeMode) | None = None  # type: ignore[valid-type]
    # The namespace of the Prometheus that scrapes the exporter: the only one a NetworkPolicy lets
    # reach the metrics port (default gmp-system on GKE, monitoring on a generic cluster).
    scraper_namespace: Annotated[str, Field(max_length=63, pattern=DNS_LABEL)] | None = None
