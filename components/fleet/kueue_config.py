"""The manager's Kueue Configuration: the chart's own default (charts/kueue/values.yaml,
managerConfig.controllerManagerConfigYaml, kubernetes-sigs/kueue tag v0.19.2, commit 8eab6877), with the
`multiKueue` block the fleet sets (apis/config/v1beta2/configuration_types.go at the same tag)."""

from typing import Any

import yaml

# The dispatcher names of Kueue v0.19.2 (configuration_types.go).
DISPATCHERS = {
    "allAtOnce": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
}
# The chart's integrations at v0.19.2; MultiKueue dispatches batch/job and jobset.x-k8s.io/jobset among
# them (site/content/en/docs/concepts/multikueue.md, "Supported Job Types").
FRAMEWORKS = [
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/rayservice",
    "ray.io/raycluster",
    "jobset.x-k8s.io/jobset",
    "workload.codeflare.dev/appwrapper",
    "trainer.kubeflow.org/trainjob",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
]


def manager_configuration(dispatcher: str) -> dict[str, Any]:
    """The chart's default Configuration plus the dispatcher; `incremental` offers a job to one
    worker at a time (stepSize 1, the MultiKueueIncrementalDispatcherConfig gate is Beta and on in
    v0.19), in its MultiKueueConfig's order (MultiKueueIncrementalDispatcherRespectConfigOrder, Beta,
    on)."""
    multikueue: dict[str, Any] = {"dispatcherName": DISPATCHERS[dispatcher]}
    if dispatcher == "incremental":
        multikueue["incrementalDispatcherConfig"] = {"stepSize": 1}
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "multiKueue": multikueue,
    }


def chart_values(dispatcher: str) -> dict[str, Any]:
    """The Kueue chart's values on the manager."""
    text = yaml.safe_dump(manager_configuration(dispatcher), sort_keys=False)
    return {"managerConfig": {"controllerManagerConfigYaml": text}}
