"""A fleet team's members on the manager, where they submit: the team role bound in the team's
namespaces there under the same rules as batch.teams[].members, and the manager's and workers' team
namespaces admitting a Job or JobSet only through their own LocalQueues."""

from __future__ import annotations

from typing import Any

from tests.admission_eval import evaluate
from tests.conftest import render
from tests.test_fleet import errors, fleet_config, fleet_raw, on_cluster
from tests.test_gpudirect_admission import BINDING, POLICY

MEMBERS = ["user:alice@example.com", "group:ml-research@example.com"]


def _with_members(members: list[str], *, security_group: bool = True) -> dict[str, Any]:
    raw = fleet_raw()
    raw["fleet"]["teams"][0]["members"] = list(members)
    if security_group:
        raw["cluster"]["rbacSecurityGroup"] = "gke-security-groups@example.com"
    return raw


def _queue_policy(resources: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    (policy,) = [r.inputs["spec"] for r in resources if r.type == POLICY]
    (bound,) = [r.inputs["spec"] for r in resources if r.type == BINDING]
    return policy, bound


def _job(queue: str | None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "labels": labels}}


def test_members_are_bound_to_the_team_role_in_the_teams_namespaces_on_the_manager() -> None:
    result = render(fleet_config(_with_members(MEMBERS)))
    manager = on_cluster(result, "gke")
    (role,) = [r.inputs for r in manager if r.name == "fleet-team-member-role"]
    assert role["metadata"]["name"] == "gke-gpu-team-member"
    bindings = [r.inputs for r in manager if r.type == "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"]
    assert [(b["metadata"]["namespace"], b["roleRef"]["name"]) for b in bindings] == [
        ("research", "gke-gpu-team-member")
    ]
    assert bindings[0]["subjects"] == [
        {"kind": "User", "name": "alice@example.com", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "Group", "name": "ml-research@example.com", "apiGroup": "rbac.authorization.k8s.io"},
    ]
    # No team without members is bound, and the workers get nothing from the fleet's members.
    for worker in ("us-east-gke", "us-central-gke"):
        assert not [
            r for r in on_cluster(result, worker) if r.type.endswith(":RoleBinding") and "team" in r.name
        ]


def test_without_members_the_manager_binds_nobody() -> None:
    result = render(fleet_config(fleet_raw()))
    manager = on_cluster(result, "gke")
    assert not [r for r in manager if "team-member" in r.name or r.type.endswith(":RoleBinding")]


def test_a_group_needs_google_groups_for_rbac_on_the_manager() -> None:
    message = errors(_with_members(MEMBERS, security_group=False))
    assert (
        "gke-gpu:fleet.teams[0].members[1]: 'group:ml-research@example.com' is a Google group, which the "
        "manager's RBAC sees only with Google Groups for RBAC: set gke-gpu:cluster.rbacSecurityGroup"
    ) in message
    # A user alone needs no group setting.
    render(fleet_config(_with_members(MEMBERS[:1], security_group=False)))


def test_a_member_listed_twice_or_malformed_is_refused_by_key() -> None:
    message = errors(_with_members([MEMBERS[0], MEMBERS[1], MEMBERS[0]]))
    assert message.endswith("gke-gpu:fleet.teams[0].members[2]: 'user:alice@example.com' is listed twice"), (
        message
    )
    message = errors(_with_members([MEMBERS[0], "alice@example.com"]))
    assert (
        "gke-gpu:fleet.teams[0].members[1]: 'alice@example.com' is not allowed; expected group:<email> or "
        "user:<email>"
    ) in message


def test_the_managers_team_namespaces_admit_jobs_only_through_their_local_queues() -> None:
    result = render(fleet_config(fleet_raw()))
    policy, bound = _queue_policy(on_cluster(result, "gke"))
    assert bound["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "platform",
        "research",
    ]
    assert evaluate(policy, bound, _job("gpu-h100"), "research").admitted
    assert not evaluate(policy, bound, _job(None), "research").admitted
    # On the worker, the copy MultiKueue creates keeps the job's labels (K@ pkg/util/api/api.go:50-57)
    # and comes from the manager's identity: the worker's own policy admits it.
    policy, bound = _queue_policy(on_cluster(result, "us-east-gke"))
    copy = _job("gpu-h100")
    copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] = "multikueue"
    copy["metadata"]["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": "job-train-1a2b3"}
    assert evaluate(
        policy, bound, copy, "research", user="mk-gpu-fleet@example.iam.gserviceaccount.com"
    ).admitted
