"""MultiKueueManager's args: what the fleet's plan (plan.py) builds and the component takes."""

from typing import Literal, NotRequired, TypedDict

import pulumi


class ManagerWorker(TypedDict):
    name: str
    """The worker's name: its MultiKueueCluster's."""
    fleet_membership: NotRequired[pulumi.Input[str]]
    """The worker's fleet Membership (`//gkehub.googleapis.com/projects/<p>/locations/<l>/memberships/
    <id>`, GkeCluster.fleet_membership): the manager reaches it through the ClusterProfile GKE's fleet
    keeps for it in kueue-system. Defaults to none: the manager reads the worker's kubeconfig from the
    Secret `multikueue-<name>` in kueue-system, which the user creates (a token they renew); the
    component declares no Secret."""


class FleetAccess(TypedDict):
    project: str
    """The fleet's project: Kueue's Google service account is made there, with Connect Gateway's roles."""
    cluster_name: str
    """The manager's GKE cluster: names Kueue's Google service account."""
    plugin_image: str
    """The image holding Google's gcp-auth-plugin (at /gcp-auth-plugin), which Kueue runs for the
    ClusterProfiles' access provider."""


class ManagerQuota(TypedDict):
    gpus: int
    cpus: int
    memory_gib: int
    ephemeral_storage_gib: int


class ManagerQueue(TypedDict):
    team: str
    """The team: its ClusterQueue is `gpu-<pool>-<team>`, in the cohort `gpu-<pool>`."""
    namespace: str
    """The team's namespace: its LocalQueue `gpu-<pool>` (the workers have the same)."""
    pool: str
    """The workers' pool name the queue stands for."""
    workers: list[str]
    """The workers it dispatches to, most preferred first (its MultiKueueConfig's order)."""
    quota: ManagerQuota
    """The sum of the team's shares on those workers (Kueue's docs: the manager's quota should equal
    the workers' total)."""
    borrowing_limit: NotRequired[ManagerQuota]
    """The most it may borrow from the cohort's idle quota: the sum of what it may borrow on those
    workers. Defaults to no limit."""
    gpudirect: NotRequired[bool]
    """The pool is a GPUDirect pool on its workers, whose GPUDirect Pods run in `gpudirect-<team>`: the
    manager has that namespace too, with the LocalQueue `gpu-<pool>`, and the ClusterQueue admits both
    (MultiKueue creates the job in the namespace it was submitted from). Defaults to false."""


class ManagerTeam(TypedDict):
    name: str
    """The team, as its queues name it."""
    members: list[str]
    """`group:<email>` or `user:<email>`: each bound by a RoleBinding `gke-gpu-team-members` in the
    team's namespaces on the manager (its own, and `gpudirect-<team>` where a queue has it) to the
    ClusterRole `gke-gpu-team-member` (workloads/team_access.py); a group needs Google Groups for RBAC
    on the manager's cluster."""


class MultiKueueManagerArgs(TypedDict):
    workers: list[ManagerWorker]
    queues: list[ManagerQueue]
    teams: NotRequired[list[ManagerTeam]]
    """Who submits each team's jobs on the manager. Defaults to none: no RoleBinding."""
    dispatcher: NotRequired[Literal["allAtOnce", "incremental"]]
    """Kueue's dispatcher (docs/fleet.md). Defaults to allAtOnce."""
    fleet_access: NotRequired[FleetAccess]
    """Required with a worker reached through its ClusterProfile: how Kueue authenticates to it."""
