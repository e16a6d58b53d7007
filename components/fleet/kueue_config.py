"""The manager's Kueue Configuration: the chart's own default (charts/kueue/values.yaml,
managerConfig.controllerManagerConfigYaml, kubernetes-sigs/kueue tag v0.19.2, commit 8eab6877), with the
`multiKueue` block the fleet sets (apis/config/v1beta2/configuration_types.go at the same tag)."""

from typing import Any

from ..workloads.kueue_config import chart_values as kueue_chart_values
from ..workloads.kueue_config import kueue_configuration
from .manager_access import FEATURE_GATE, access_configuration

# The dispatcher names of Kueue v0.19.2 (configuration_types.go:392-400).
DISPATCHERS = {
    "allAtOnce": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
}


def manager_configuration(dispatcher: str, *, cluster_profiles: bool = False) -> dict[str, Any]:
    """The chart's default Configuration plus the dispatcher; `incremental` offers a job to one
    worker at a time (stepSize 1, the MultiKueueIncrementalDispatcherConfig gate is Beta and on in
    v0.19), in its MultiKueueConfig's order (MultiKueueIncrementalDispatcherRespectConfigOrder, Beta,
    on). With `cluster_profiles`, the access provider of the workers reached through the fleet
    (manager_access.py)."""
    multikueue: dict[str, Any] = {"dispatcherName": DISPATCHERS[dispatcher]}
    if dispatcher == "incremental":
        multikueue["incrementalDispatcherConfig"] = {"stepSize": 1}
    if cluster_profiles:
        multikueue.update(access_configuration())
    return kueue_configuration(multikueue=multikueue)


def chart_values(dispatcher: str, *, cluster_profiles: bool = False) -> dict[str, Any]:
    """The Kueue chart's values on the manager; with `cluster_profiles`, the alpha gate
    MultiKueueClusterProfile on (the chart's `controllerManager.featureGates`, which become the
    controller's `--feature-gates`: charts/kueue/values.yaml:31-34, templates/manager/manager.yaml:57)."""
    values = kueue_chart_values(manager_configuration(dispatcher, cluster_profiles=cluster_profiles))
    if cluster_profiles:
        values["controllerManager"] = {"featureGates": [{"name": FEATURE_GATE, "enabled": True}]}
    return values
