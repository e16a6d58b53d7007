"""Who may use a team's namespaces: `batch.teams[].members` (`group:<email>`, `user:<email>`), each bound
in the team's namespaces to one ClusterRole, `gke-gpu-team-member`, that runs and watches jobs and
nothing else.

The role is Kueue's `batch-user-role` for the kinds this program installs (Kueue v0.19.2,
kubernetes-sigs/kueue@8eab6877 config/components/rbac/: job_editor_role.yaml, jobset_editor_role.yaml,
workload_viewer_role.yaml, localqueue_viewer_role.yaml), plus reading the jobs' Pods, their logs and
the namespace's events (what `kubectl get pods`, `kubectl logs` and `kubectl describe` need). What it
leaves out on purpose, each a way out of the controls the program sets:

* Namespaces (their Pod Security labels) and every RBAC kind: a RoleBinding grants a rule on
  `namespaces` for its own namespace (the request's namespace is the Namespace's name), so a team able
  to patch its Namespace could lower its Pod Security level;
* NetworkPolicies (a team's default-deny egress), ResourceQuotas and LimitRanges;
* Pods' exec, attach, port-forward and ephemeral containers, and creating Pods, Secrets or
  ServiceAccount tokens directly (a Pod not made by a Job is not queued by Kueue);
* ResourceClaims and their templates (a GPU NIC or GPU claimed outside the queue);
* admission policies and their bindings, which are cluster-scoped: no RoleBinding grants them.

Creating a Job or JobSet is not by itself running it through Kueue: Kueue ignores a job without the
label `kueue.x-k8s.io/queue-name` (`manageJobsWithoutQueueName` is false by default), which would then
run around the team's quota. The policy `gke-gpu-team-queue-name` (queue_admission.py) refuses such a
Job or JobSet in the team's namespaces, and one naming a LocalQueue that is not the namespace's.

A RoleBinding binds a ClusterRole within its namespace only (kubernetes.io "Using RBAC Authorization",
RoleBinding and ClusterRoleBinding). A `Group` subject names a Google group only on a cluster with
Google Groups for RBAC (GkeCluster's `rbac_security_group`; GKE "Configure Google Groups for RBAC"); a
`User` subject is the Google account's email, as GKE authenticates it.

What RBAC cannot take away: IAM. A member with a project role such as roles/container.developer may do
in every namespace what that role allows, whatever these bindings say (GKE "Access control": IAM and
RBAC are checked in turn, either may allow). Give members roles/container.clusterViewer (to fetch
credentials) and nothing broader in IAM (docs/security.md).
"""

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ..core.k8s import app_labels

TEAM_ROLE = "gke-gpu-team-member"
TEAM_BINDING = "gke-gpu-team-members"
RBAC_GROUP = "rbac.authorization.k8s.io"
_EDIT = ["create", "delete", "get", "list", "patch", "update", "watch"]
_READ = ["get", "list", "watch"]
# (apiGroup, resources, verbs), in Kueue's batch-user order, then what watching a job's Pods needs.
TEAM_ROLE_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("batch", ("jobs",), tuple(_EDIT)),
    ("batch", ("jobs/status",), ("get",)),
    ("jobset.x-k8s.io", ("jobsets",), tuple(_EDIT)),
    ("jobset.x-k8s.io", ("jobsets/status",), ("get",)),
    ("kueue.x-k8s.io", ("workloads",), tuple(_READ)),
    ("kueue.x-k8s.io", ("workloads/status",), ("get",)),
    ("kueue.x-k8s.io", ("localqueues",), tuple(_READ)),
    ("kueue.x-k8s.io", ("localqueues/status",), ("get",)),
    ("", ("pods", "events"), tuple(_READ)),
    ("", ("pods/log",), ("get",)),
)


def subject(member: str) -> dict[str, str]:
    """A RoleBinding subject of `group:<email>` or `user:<email>`."""
    kind, _, email = member.partition(":")
    return {"kind": "Group" if kind == "group" else "User", "name": email, "apiGroup": RBAC_GROUP}


def declare_team_role(parent: pulumi.Resource, name: str) -> k8s.rbac.v1.ClusterRole:
    """The ClusterRole every team's RoleBindings name (cluster-scoped, once per cluster)."""
    return k8s.rbac.v1.ClusterRole(
        f"{name}-team-member-role",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=TEAM_ROLE, labels=app_labels(TEAM_ROLE, component="gpu-team")
        ),
        rules=[
            k8s.rbac.v1.PolicyRuleArgs(api_groups=[group], resources=list(resources), verbs=list(verbs))
            for group, resources, verbs in TEAM_ROLE_RULES
        ],
        opts=pulumi.ResourceOptions(parent=parent),
    )


def declare_team_bindings(
    parent: pulumi.Resource,
    resource_name: str,
    namespaces: Sequence[str],
    members: Sequence[str],
    depends_on: Sequence[pulumi.Resource],
) -> list[pulumi.Resource]:
    """A RoleBinding `gke-gpu-team-members` of `members` to the team role in each of `namespaces`."""
    subjects: list[Any] = [subject(m) for m in members]
    return [
        k8s.rbac.v1.RoleBinding(
            f"{resource_name}-{namespace}-members",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=TEAM_BINDING, namespace=namespace, labels=app_labels(namespace, component="gpu-team")
            ),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group=RBAC_GROUP, kind="ClusterRole", name=TEAM_ROLE),
            subjects=subjects,
            opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
        )
        for namespace in namespaces
    ]
