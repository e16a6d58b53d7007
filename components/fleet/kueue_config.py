"""The manager's Kueue Configuration: the chart's own default (charts/kueue/values.yaml,
managerConfig.controllerManagerConfigYaml, kubernetes-sigs/kueue tag v0.19.2, commit 8eab6877), with the
`multiKueue` block the fleet sets and the ClusterQueue resource metrics its dashboard reads
(apis/config/v1beta2/configuration_types.go at the same tag)."""

from typing import Any

from ..workloads.kueue_config import chart_values as kueue_chart_values
from ..workloads.kueue_config import kueue_configuration

# The dispatcher names of Kueue v0.19.2 (configuration_types.go).
DISPATCHERS = {
    "allAtOnce": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
}


def manager_configuration(dispatcher: str) -> dict[str, Any]:
    """The chart's default Configuration plus the dispatcher; `incremental` offers a job to one
    worker at a time (stepSize 1, the MultiKueueIncrementalDispatcherConfig gate is Beta and on in
    v0.19), in its MultiKueueConfig's order (MultiKueueIncrementalDispatcherRespectConfigOrder, Beta,
    on)."""
    multikueue: dict[str, Any] = {"dispatcherName": DISPATCHERS[dispatcher]}
    if dispatcher == "incremental":
        multikueue["incrementalDispatcherConfig"] = {"stepSize": 1}
    return kueue_configuration(multikueue=multikueue, cluster_queue_metrics=True)


def chart_values(dispatcher: str) -> dict[str, Any]:
    """The Kueue chart's values on the manager."""
    return kueue_chart_values(manager_configuration(dispatcher))
