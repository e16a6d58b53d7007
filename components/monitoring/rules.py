"""The alert policies' rules, shared by the stack file's `monitoring.alerts` (named in camelCase under
`gke-gpu:monitoring`) and GpuMonitoring's `alerts` arg (snake_case), through `KeyNames`."""

from __future__ import annotations

from ..core.common import KeyNames, Problems, cut
from .model import AlertPolicyConfig


def check_xid_errors(
    names: KeyNames, problems: Problems, *, dcgm: str, alerts: AlertPolicyConfig, dcgm_key: str
) -> None:
    """An XID alert asked for explicitly needs the self-managed exporter (`dcgm_key`: how the user
    names the DCGM source, e.g. `dcgm:`)."""
    if "xid_errors" in alerts.model_fields_set and alerts.xid_errors and dcgm != "exporter":
        problems.add(
            names.at("xid_errors"),
            f"true is not allowed with {dcgm_key}: {dcgm}: XID errors come only from the self-managed "
            "exporter (GKE's managed DCGM does not export DCGM_FI_DEV_XID_ERRORS); remove it or use "
            f"{dcgm_key}: exporter",
        )


def check_notification_channels(names: KeyNames, problems: Problems, *, alerts: AlertPolicyConfig) -> None:
    """Each channel once: Cloud Monitoring would notify it once anyway, so a repeated entry is a
    mistake (often a copy meant to be another channel), not a wish."""
    first: dict[str, int] = {}
    for index, channel in enumerate(alerts.notification_channels):
        if channel in first:
            problems.add(
                f"{names.at('notification_channels')}[{index}]",
                f"{cut(channel)} is listed twice (also at [{first[channel]}]); list each channel once",
            )
        else:
            first[channel] = index
