"""team-gpu-workload-queue: in a team namespace, GPU workloads are queued through one of its LocalQueues."""

from __future__ import annotations

from typing import Any

import pytest

from policy.gke_gpu_policies import teams
from policy.tests.factories import (
    JOBSET,
    OFFLINE,
    UNKNOWN_KINDS,
    gpu_pod_spec,
    jobset,
    set_path,
    stack_args,
    unknown,
    violations,
    workload,
)

NAMESPACE = "kubernetes:core/v1:Namespace"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
TEAM = {"gke-gpu/team": "research"}


def team_namespace(name: str = "research") -> tuple[str, str, dict[str, Any]]:
    return (NAMESPACE, f"batch-team-{name}-namespace", {"metadata": {"name": name, "labels": TEAM}})


def local_queue(
    name: str = "gpu-train", namespace: str = "research", labels: Any = TEAM
) -> tuple[str, str, dict]:
    props = {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"clusterQueue": "x"},
    }
    return (LOCAL_QUEUE, f"batch-{name}/{namespace}-local-queue", props)


def in_namespace(
    props: dict[str, Any], namespace: str = "research", queue: str | None = None
) -> dict[str, Any]:
    props = set_path(props, "metadata.namespace", namespace)
    labels = {} if queue is None else {"kueue.x-k8s.io/queue-name": queue}
    return set_path(props, "metadata.labels", labels)


def check(*resources: tuple[str, str, dict[str, Any]]) -> list[str]:
    return violations(teams.validate_team_gpu_workload_queue, stack_args(list(resources)))


def test_a_queued_gpu_job_in_a_team_namespace_complies() -> None:
    job = (JOB, "train", in_namespace(workload(JOB), queue="gpu-train"))
    assert check(team_namespace(), local_queue(), job) == []


@pytest.mark.parametrize(
    ("queue", "found"),
    [(None, "is missing"), ("gpu-l4", "is 'gpu-l4', not a LocalQueue of the namespace"), ("", "is ''")],
)
def test_an_unqueued_gpu_workload_in_a_team_namespace_is_a_violation(queue: str | None, found: str) -> None:
    job = (JOB, "train", in_namespace(workload(JOB), queue=queue))
    (message,) = check(team_namespace(), local_queue(), job)
    assert message.startswith("Job 'train' (research): its Pods ask for nvidia.com/gpu in team namespace")
    assert f"metadata.labels[kueue.x-k8s.io/queue-name] {found}" in message
    assert message.endswith("one of the namespace's LocalQueues: gpu-train [team-gpu-workload-queue]")


def test_jobsets_and_deployments_are_checked_too() -> None:
    jobs = (JOBSET, "nccl", in_namespace(jobset(queue=None)))
    serving = (DEPLOYMENT, "chat", in_namespace(workload(DEPLOYMENT)))
    found = check(team_namespace(), local_queue(), jobs, serving)
    assert [m.split(":")[0] for m in found] == ["JobSet 'nccl' (research)", "Deployment 'chat' (research)"]


def test_an_existing_namespace_is_a_team_namespace_through_its_team_local_queue() -> None:
    job = (JOB, "train", in_namespace(workload(JOB), namespace="ml"))
    assert len(check(local_queue(namespace="ml"), job)) == 1


def test_other_namespaces_and_cpu_workloads_are_left_alone() -> None:
    samples = (JOB, "smi", in_namespace(workload(JOB), namespace="gpu-samples"))
    cpu = (JOB, "etl", in_namespace(workload(JOB, pod_spec={"containers": [{"name": "c", "image": "x"}]})))
    # A LocalQueue without the team label (the samples') makes no team namespace.
    assert check(team_namespace(), local_queue(namespace="gpu-samples", labels={}), samples, cpu) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_values_not_known_yet_are_never_violations(kind: str) -> None:
    label = (
        JOB,
        "train",
        set_path(
            in_namespace(workload(JOB)), ("metadata", "labels", "kueue.x-k8s.io/queue-name"), unknown(kind)
        ),
    )
    assert check(team_namespace(), local_queue(), label) == []
    # A LocalQueue whose name is not known yet: any non-empty label may name it.
    job = (JOB, "train", in_namespace(workload(JOB), queue="gpu-other"))
    assert check(team_namespace(), local_queue(name=unknown(kind)), job) == []
    assert kind in (OFFLINE, "engine")


def test_the_pack_serves_the_team_policy_before_the_serving_ones() -> None:
    from policy.gke_gpu_policies import rules

    assert rules.POLICIES[-4:-3] == teams.TEAM_POLICIES
    assert [p.name for p in teams.TEAM_POLICIES] == [teams.TEAM_QUEUE_LABEL]


def test_a_cronjob_is_queued_by_its_job_templates_label() -> None:
    cron = workload("kubernetes:batch/v1:CronJob")
    queued = set_path(
        cron, ("spec", "jobTemplate", "metadata", "labels"), {"kueue.x-k8s.io/queue-name": "gpu-train"}
    )
    queued = set_path(queued, "metadata.namespace", "research")
    assert check(team_namespace(), local_queue(), ("kubernetes:batch/v1:CronJob", "nightly", queued)) == []
    # Labelled only at the top, which Kueue does not read: a violation.
    top = in_namespace(cron, queue="gpu-train")
    (message,) = check(team_namespace(), local_queue(), ("kubernetes:batch/v1:CronJob", "nightly", top))
    assert "spec.jobTemplate.metadata.labels[kueue.x-k8s.io/queue-name] is missing" in message


def test_a_leader_worker_sets_leader_template_counts_too() -> None:
    # The leader asks for GPUs, the workers do not: still a GPU workload of the team.
    cpu_only = {"containers": [{"name": "sidecar", "image": "busybox"}]}
    group = {
        "metadata": {"name": "big"},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"spec": gpu_pod_spec()},
                "workerTemplate": {"spec": cpu_only},
            }
        },
    }
    lws = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    (message,) = check(team_namespace(), local_queue(), (lws, "big", in_namespace(group)))
    assert message.endswith(f"[{teams.TEAM_QUEUE_LABEL}]") and "LeaderWorkerSet 'big'" in message
    assert check(team_namespace(), local_queue(), (lws, "big", in_namespace(group, queue="gpu-train"))) == []
