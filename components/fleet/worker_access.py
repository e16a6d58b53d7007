"""What the MultiKueue manager may do on a worker: the least Kubernetes RBAC Kueue v0.19.2's MultiKueue
needs (kubernetes-sigs/kueue@8eab6877, K@ below), namespaced where Kueue allows it.

The rules are Kueue's `site/static/examples/multikueue/create-multikueue-kubeconfig.sh` cut to the
kinds a fleet dispatches (batch Jobs, JobSets) and Kueue's own objects, split in two:

* reading is cluster-wide: the manager's client watches and lists Workloads, Jobs and JobSets in every
  namespace (K@ pkg/controller/admissionchecks/multikueue/multikueuecluster.go:401-424, `establishWatch`
  with no namespace; :692-693, the garbage collector's list) and caches ClusterQueues and LocalQueues
  (:518-557);
* writing (create and delete the job and its Workload, update the Workload and its status) is granted
  only in the namespaces the fleet's queues use on the worker: MultiKueue creates a job in the
  namespace it was submitted from (K@ site/content/en/docs/tasks/manage/setup_multikueue.md), so
  nothing lets the manager create anything in `kube-system` or any namespace outside the fleet's.

The subject is the manager's Kueue as the worker sees it: its Google service account through Connect
Gateway (a worker of the fleet; GKE names a Google identity by its email in RBAC), or, for a worker
reached by token (the opt-in for a cluster outside the fleet), a ServiceAccount `multikueue` in
`kueue-system` whose short-lived tokens the user creates (`kubectl create token`): no token Secret
here, so no token in the program's state.
"""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import K8sName
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels
from ..core.validation import ArgsModel, Deferrable
from ..workloads.model import NamespaceName
from .model import KUEUE_NAMESPACE

ACCOUNT = "multikueue"
_READ = ["get", "list", "watch"]
# create-multikueue-kubeconfig.sh's ClusterRole (Kueue v0.19.2), the job kinds a fleet dispatches only:
# what the manager reads everywhere ...
READ_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _READ},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": _READ},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": _READ},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": _READ},
]
# ... and what it changes, in the fleet's namespaces only.
WRITE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["create", "delete"]},
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        "verbs": ["create", "delete", "update", "patch"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch", "update"]},
]
READER = f"{ACCOUNT}-worker-read"
WRITER = f"{ACCOUNT}-worker-write"


class MultiKueueWorkerAccessArgs(TypedDict):
    worker: str
    """The worker's name (its MultiKueueCluster's on the manager)."""
    namespaces: list[str]
    """The namespaces the fleet's queues use on the worker: where the manager may create and delete
    jobs and Workloads (a RoleBinding in each; they must exist). Empty: it may only read."""
    manager_identity: NotRequired[pulumi.Input[str]]
    """The email of the manager's Kueue's Google service account: a worker reached through the fleet
    (Connect Gateway) grants it. Defaults to none: the worker is reached by token, and grants a
    ServiceAccount `multikueue` in kueue-system, whose tokens the user creates."""


class _Spec(ArgsModel):
    worker: K8sName
    namespaces: Annotated[list[NamespaceName], Field(max_length=200)]
    manager_identity: (
        Deferrable[Annotated[str, Field(max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")]] | None
    ) = None


def _rules(rules: list[dict[str, Any]]) -> list[k8s.rbac.v1.PolicyRuleArgs]:
    return [
        k8s.rbac.v1.PolicyRuleArgs(api_groups=r["apiGroups"], resources=r["resources"], verbs=r["verbs"])
        for r in rules
    ]


class MultiKueueWorkerAccess(GkeGpuComponent[_Spec]):
    """On a worker: a ClusterRole `multikueue-worker-read` (get, list, watch) bound cluster-wide and a
    ClusterRole `multikueue-worker-write` (create, delete, update) bound by a RoleBinding in each of the
    fleet's namespaces, to the manager's Kueue: its Google service account (`manager_identity`), or a
    ServiceAccount `kueue-system/multikueue` whose short-lived tokens the user creates. Not managed: a
    token (none is created, none is stored) and the manager's kubeconfig Secret for a token."""

    subject: pulumi.Output[str]
    """Who the manager is on the worker: `User <email>` or `ServiceAccount kueue-system/multikueue`."""

    _args_model = _Spec

    def __init__(
        self,
        name: str,
        /,
        args: MultiKueueWorkerAccessArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = app_labels(ACCOUNT, component="multikueue")
        identity = args.get("manager_identity")
        subject: k8s.rbac.v1.SubjectArgs
        depends: list[pulumi.Resource] = []
        if identity is not None:
            subject = k8s.rbac.v1.SubjectArgs(
                kind="User", name=identity, api_group="rbac.authorization.k8s.io"
            )
            self.subject = pulumi.Output.concat("User ", identity)
        else:
            depends.append(
                k8s.core.v1.ServiceAccount(
                    f"{name}-account",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=ACCOUNT, namespace=KUEUE_NAMESPACE, labels=labels
                    ),
                    automount_service_account_token=False,
                    opts=child,
                )
            )
            subject = k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=ACCOUNT, namespace=KUEUE_NAMESPACE)
            self.subject = pulumi.Output.from_input(f"ServiceAccount {KUEUE_NAMESPACE}/{ACCOUNT}")
        reader = k8s.rbac.v1.ClusterRole(
            f"{name}-read",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=READER, labels=labels),
            rules=_rules(READ_RULES),
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-read-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=READER, labels=labels),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=READER
            ),
            subjects=[subject],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[reader, *depends]),
        )
        writer = k8s.rbac.v1.ClusterRole(
            f"{name}-write",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=WRITER, labels=labels),
            rules=_rules(WRITE_RULES),
            opts=child,
        )
        for namespace in spec.namespaces:
            k8s.rbac.v1.RoleBinding(
                f"{name}-write-{namespace}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=WRITER, namespace=namespace, labels=labels),
                role_ref=k8s.rbac.v1.RoleRefArgs(
                    api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=WRITER
                ),
                subjects=[subject],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[writer, *depends]),
            )
        self.register_outputs({"subject": self.subject})
