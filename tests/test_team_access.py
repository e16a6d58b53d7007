"""Team RBAC from the stack file (`batch.teams[].members`): RoleBindings in the team's namespaces to a
role that runs and watches jobs but cannot edit Namespaces, their labels, NetworkPolicies, admission
policies or RBAC; Google Groups for RBAC where a group is named; every bad input refused with its key."""

from typing import Any

import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.workloads.batch_queues import GpuBatchQueues
from gke_gpu.workloads.team_access import TEAM_BINDING, TEAM_ROLE, TEAM_ROLE_RULES
from tests.conftest import config_error, render, stack_config
from tests.test_teams import MEGA, ZONAL

ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
CLUSTER = "gcp:container/cluster:Cluster"
SECURITY_GROUP = "gke-security-groups@example.com"
MEMBERS = ["group:ml-research@example.com", "user:alice@example.com"]


def teams(*members: list[str]) -> dict[str, Any]:
    return {
        "kueue": True,
        "teams": [
            {"name": name, "pools": {"train": {"gpus": 8}}, **({"members": m} if m else {})}
            for name, m in zip(("research", "platform"), members, strict=False)
        ],
    }


@pytest.fixture(scope="module")
def with_members() -> Any:
    cluster = {**ZONAL, "rbacSecurityGroup": SECURITY_GROUP}
    return render(stack_config(cluster=cluster, gpuPools=[MEGA], batch=teams(MEMBERS, [])))


def allows(rules: list[dict[str, Any]], verb: str, group: str, resource: str) -> bool:
    """What the RBAC authorizer decides for one rule list (no resourceNames, no wildcards expected)."""
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def test_members_get_a_role_binding_in_each_of_their_teams_namespaces(with_members: Any) -> None:
    bindings = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs
        for r in with_members.of_type(ROLE_BINDING)
    }
    assert set(bindings) == {("research", TEAM_BINDING), ("gpudirect-research", TEAM_BINDING)}
    for binding in bindings.values():
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": TEAM_ROLE,
        }
        assert binding["subjects"] == [
            {"kind": "Group", "name": "ml-research@example.com", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "User", "name": "alice@example.com", "apiGroup": "rbac.authorization.k8s.io"},
        ]


def test_the_team_role_runs_and_watches_jobs(with_members: Any) -> None:
    (role,) = with_members.of_type(ROLE)
    rules = role.inputs["rules"]
    assert role.inputs["metadata"]["name"] == TEAM_ROLE
    for verb in ("create", "delete", "get", "list", "watch"):
        assert allows(rules, verb, "batch", "jobs")
        assert allows(rules, verb, "jobset.x-k8s.io", "jobsets")
    for resource in ("workloads", "localqueues"):
        assert allows(rules, "watch", "kueue.x-k8s.io", resource)
    assert allows(rules, "get", "", "pods/log") and allows(rules, "watch", "", "pods")
    assert len(rules) == len(TEAM_ROLE_RULES)


@pytest.mark.parametrize(
    ("verb", "group", "resource"),
    [
        ("patch", "", "namespaces"),  # its labels: the Pod Security level
        ("update", "", "namespaces"),
        ("create", "rbac.authorization.k8s.io", "rolebindings"),
        ("bind", "rbac.authorization.k8s.io", "clusterroles"),
        ("escalate", "rbac.authorization.k8s.io", "roles"),
        ("delete", "networking.k8s.io", "networkpolicies"),
        ("update", "admissionregistration.k8s.io", "validatingadmissionpolicies"),
        ("delete", "admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
        ("create", "", "pods"),  # a Pod not made by a Job is not queued
        ("create", "", "pods/exec"),
        ("create", "", "pods/attach"),
        ("patch", "", "pods/ephemeralcontainers"),
        ("create", "", "serviceaccounts/token"),
        ("create", "resource.k8s.io", "resourceclaims"),
        ("update", "kueue.x-k8s.io", "localqueues"),
        ("delete", "", "resourcequotas"),
    ],
)
def test_the_team_role_cannot_reach_around_the_controls(
    with_members: Any, verb: str, group: str, resource: str
) -> None:
    (role,) = with_members.of_type(ROLE)
    rules = role.inputs["rules"]
    assert not allows(rules, verb, group, resource)
    assert all("*" not in r["verbs"] + r["resources"] + r["apiGroups"] for r in rules)


def test_a_named_group_turns_on_google_groups_for_rbac(with_members: Any) -> None:
    (cluster,) = with_members.of_type(CLUSTER)
    assert cluster.inputs["authenticatorGroupsConfig"] == {"securityGroup": SECURITY_GROUP}


def test_without_members_nothing_changes() -> None:
    result = render(stack_config(cluster=ZONAL, gpuPools=[MEGA], batch=teams([], [])))
    assert not result.of_type(ROLE) and not result.of_type(ROLE_BINDING)
    (cluster,) = result.of_type(CLUSTER)
    assert "authenticatorGroupsConfig" not in cluster.inputs


def test_the_policy_pack_passes_a_stack_with_members(with_members: Any) -> None:
    from tools import check_policies, plan

    report = check_policies.report(plan.to_document(with_members))
    assert report["checked"] and report["passed"], report


# --------------------------------------------------------------------------------------------------
# Bad input.


def error(members: list[str], **cluster: Any) -> str:
    return config_error({"cluster": {**ZONAL, **cluster}, "gpuPools": [MEGA], "batch": teams(members)})


@pytest.mark.parametrize(
    "member",
    [
        "alice@example.com",
        "group:",
        "serviceAccount:ci@p.iam.gserviceaccount.com",
        "user:alice",
        "group:a b@x.com",
    ],
)
def test_a_member_that_is_neither_group_nor_user_with_an_email_is_refused(member: str) -> None:
    message = error([member], rbacSecurityGroup=SECURITY_GROUP)
    assert "gke-gpu:batch.teams[0].members[0]: " in message
    assert "expected group:<email> or user:<email>" in message


def test_a_group_needs_google_groups_for_rbac_on_the_cluster() -> None:
    message = error(["user:bob@example.com", "group:ml@example.com", "group:ops@example.com"])
    assert message.count("\n  - ") == 1, message
    assert "gke-gpu:batch.teams[0].members[1]: 'group:ml@example.com' is a Google group" in message
    assert "set gke-gpu:cluster.rbacSecurityGroup to gke-security-groups@<your domain>" in message
    # Users alone need nothing of the cluster.
    render(stack_config(cluster=ZONAL, gpuPools=[MEGA], batch=teams(["user:bob@example.com"])))


def test_the_security_group_must_be_gke_security_groups() -> None:
    message = error(["group:ml@example.com"], rbacSecurityGroup="rbac@example.com")
    assert "gke-gpu:cluster.rbacSecurityGroup: 'rbac@example.com' is not allowed" in message
    assert "gke-security-groups@<your domain>" in message
    assert "members[0]" not in message, "no follow-on problem on the group member"


def test_a_member_listed_twice_is_refused() -> None:
    message = error(["user:bob@example.com", "user:bob@example.com"])
    assert "gke-gpu:batch.teams[0].members[1]: 'user:bob@example.com' is listed twice" in message


def test_members_on_a_cluster_the_program_does_not_create_are_refused() -> None:
    raw = {
        "cluster": {"mode": "existing", "kubeconfig": "apiVersion: v1\nkind: Config\n", "flavor": "gke"},
        "batch": teams(["user:bob@example.com"]),
    }
    message = config_error(raw)
    assert "gke-gpu:batch.teams[0].members: is not allowed with cluster.mode existing" in message


def test_the_component_refuses_what_the_stack_file_refuses() -> None:
    queue = {"name": "train", "node_labels": {}, "tolerations": [], "gpus": 8, "cpus": 8, "memory_gib": 8}
    queue |= {"ephemeral_storage_gib": 8}
    shape = {"name": "research", "namespace": "research", "members": ["alice", "user:b@example.com"]}
    twice = {"name": "platform", "namespace": "platform", "members": ["user:b@example.com"] * 2}
    for team, expected in (
        (shape, "teams[0].members[0]: 'alice' is not allowed; expected group:<email> or user:<email>"),
        (twice, "teams[0].members[1]: 'user:b@example.com' is listed twice"),
    ):
        with pytest.raises(InvalidArgsError) as info:
            GpuBatchQueues.check_args("batch", {"queues": [queue], "teams": [team]})
        assert any(expected in p for p in info.value.problems), info.value.problems
