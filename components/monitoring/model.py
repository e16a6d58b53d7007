"""The monitoring section (the stack file's `gke-gpu:monitoring`) and the alert policies' settings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..core.common import (
    MAX_CHANNELS_PER_POLICY,
)
from ..core.model import (
    CHANNEL,
    DNS_LABEL,
    StackModel,
)


class AlertPolicyConfig(StackModel):
    """The alert policies' settings: the stack file's `monitoring.alerts` and GpuMonitoring's `alerts`."""

    notification_channels: Annotated[
        list[Annotated[str, Field(max_length=200, pattern=CHANNEL)]],
        Field(max_length=MAX_CHANNELS_PER_POLICY),
    ] = []
    idle_gpu_minutes: int = Field(120, ge=5, le=1440)
    idle_gpu_utilization_percent: float = Field(5, ge=0, le=100)
    xid_errors: bool = True


class AlertsConfig(AlertPolicyConfig):
    enabled: bool = False


class MonitoringConfig(StackModel):
    # Defaults depend on the cluster: managed and a dashboard on GKE; the exporter and no Cloud
    # Monitoring dashboard on a generic cluster.
    dcgm: Literal["managed", "exporter", "none"] | None = None
    dashboard: bool | None = None
    alerts: AlertsConfig = AlertsConfig()
    scrape: Literal["podMonitoring", "serviceMonitor", "annotations"] | None = None
    # The namespace of the Prometheus that scrapes the exporter: the only one a NetworkPolicy lets
    # reach the metrics port (default gmp-system on GKE, monitoring on a generic cluster).
    scraper_namespace: Annotated[str, Field(max_length=63, pattern=DNS_LABEL)] | None = None
