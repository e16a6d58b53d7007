"""A team member cannot run a Job or JobSet around Kueue's quota: the rendered policy
`gke-gpu-team-queue-name`, evaluated as the API server does (tests/admission_eval.py), admits one in a
team's namespace only with `kueue.x-k8s.io/queue-name` naming a LocalQueue of that namespace, and
leaves the program's own jobs and the JobSet controller's child Jobs alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gke_gpu.workloads.queue_admission import QUEUE_POLICY
from tests.admission_eval import Verdict, evaluate
from tests.conftest import stack_render
from tests.test_gpudirect_admission import BINDING, JOBSET, POLICY
from tools.offline import RunResult

JOBSET_CONTROLLER = "system:serviceaccount:jobset-system:batch-jobset-controller"


@pytest.fixture(scope="module")
def train() -> RunResult:
    return stack_render("train")


def _policy(result: RunResult, provider: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    def mine(r: Any) -> bool:
        return provider is None or provider in (r.provider or "")

    (found,) = [
        r.inputs for r in result.of_type(POLICY) if r.inputs["metadata"]["name"] == QUEUE_POLICY if mine(r)
    ]
    (bound,) = [
        r.inputs for r in result.of_type(BINDING) if r.inputs["spec"]["policyName"] == QUEUE_POLICY if mine(r)
    ]
    return found["spec"], bound["spec"]


def job(queue: str | None = None, *, owner: str | None = None) -> dict[str, Any]:
    labels = {"app": "train"} | ({"kueue.x-k8s.io/queue-name": queue} if queue is not None else {})
    metadata: dict[str, Any] = {"name": "train", "labels": labels}
    if owner:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": owner,
                "uid": "1",
                "controller": True,
            }
        ]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": {"spec": {}}}}


def verdict(result: RunResult, obj: dict[str, Any], namespace: str, **kwargs: Any) -> Verdict:
    spec, bound = _policy(result)
    return evaluate(spec, bound, obj, namespace, **kwargs)


def test_bound_to_every_team_namespace_by_name(train: RunResult) -> None:
    spec, bound = _policy(train)
    (selector,) = bound["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert selector == {
        "key": "kubernetes.io/metadata.name",
        "operator": "In",
        "values": ["gpudirect-platform", "gpudirect-research", "platform", "research"],
    }
    assert bound["validationActions"] == ["Deny"] and spec["failurePolicy"] == "Fail"
    rules = spec["matchConstraints"]["resourceRules"]
    assert [(r["apiGroups"], r["resources"], r["operations"]) for r in rules] == [
        (["batch"], ["jobs"], ["CREATE", "UPDATE"]),
        (["jobset.x-k8s.io"], ["jobsets"], ["CREATE", "UPDATE"]),
    ]


def test_a_job_without_a_queue_is_refused_in_a_team_namespace(train: RunResult) -> None:
    result = verdict(train, job(), "research")
    assert result.applies and not result.admitted
    assert "runs only through Kueue" in result.denied[0]


def test_a_jobset_without_a_queue_is_refused_in_a_gpudirect_namespace(train: RunResult) -> None:
    jobset = job()
    jobset.update(apiVersion="jobset.x-k8s.io/v1alpha2", kind="JobSet")
    assert not verdict(train, jobset, "gpudirect-research").admitted


def test_a_queue_of_the_namespace_is_admitted_another_is_not(train: RunResult) -> None:
    assert verdict(train, job("gpu-train"), "research").admitted
    assert verdict(train, job("gpu-train"), "gpudirect-platform").admitted
    # The all-reduce's own queue is not the team's: a team cannot take the test's quota.
    refused = verdict(train, job("nccl-train"), "research")
    assert refused.denied == [
        "kueue.x-k8s.io/queue-name in gpudirect-platform, gpudirect-research, platform, research names one "
        "of gpu-train, the LocalQueues there"
    ]
    assert not verdict(train, job(""), "research").admitted


def test_only_the_jobset_controller_may_create_a_child_job_without_a_queue(train: RunResult) -> None:
    # Kueue's sample exempts any Job claiming a JobSet owner: anyone can write the ownerReference.
    forged = job(owner="mine")
    assert not verdict(train, forged, "research").admitted
    child = verdict(train, forged, "research", user=JOBSET_CONTROLLER)
    assert not child.applies and child.admitted
    # The controller's account exempts nothing else.
    assert not verdict(train, job(), "research", user=JOBSET_CONTROLLER).admitted


def test_the_stacks_own_jobs_are_not_bound(train: RunResult) -> None:
    (allreduce,) = train.of_type(JOBSET)
    obj = {k: copy.deepcopy(allreduce.inputs[k]) for k in ("metadata", "spec")}
    namespace = obj["metadata"]["namespace"]
    assert not verdict(train, obj, namespace).applies
    replicated = obj["spec"]["replicatedJobs"][0]["template"]
    assert not verdict(train, {"metadata": replicated.get("metadata", {})}, namespace).applies


def test_nvl72s_default_team_queues_only_through_its_local_queues() -> None:
    result = stack_render("nvl72")
    spec, bound = _policy(result)
    assert bound["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "gpu-jobs",
        "gpudirect-default",
    ]
    assert evaluate(spec, bound, job("gpu-rack"), "gpu-jobs").admitted
    assert not evaluate(spec, bound, job(), "gpu-jobs").admitted
    # The samples' namespace is no team's: its Jobs are the program's own.
    assert not evaluate(spec, bound, job(), "gpu-samples").applies
