"""No job around Kueue's quota in a team's namespaces: a ValidatingAdmissionPolicy that admits a Job or
JobSet there only with the label `kueue.x-k8s.io/queue-name` naming one of that namespace's own
LocalQueues.

Why: Kueue manages only the jobs it is told to. With `manageJobsWithoutQueueName` false, Kueue's
default (kubernetes-sigs/kueue@8eab6877 apis/config/v1beta2/configuration_types.go:46-53: "those jobs
are not managed and if they are created unsuspended, they will start immediately"; the chart leaves it
commented out, charts/kueue/values.yaml:153), a Job without the label runs at once, whatever the
team's quota; a team member may create Jobs and JobSets
(team_access.py). Kueue's own answer to that is this kind of policy: "Setup a Job Admission Policy"
(site/content/en/docs/tasks/manage/enforce_job_management/setup_job_admission_policy.md:21-61, the
policy site/static/examples/sample-validating-policy.yaml), which this one follows, with three changes:

* the label must name one of the namespace's LocalQueues, not any value: a queue of another namespace
  or none at all would leave the Job suspended, but a typo would too, and the refusal says which;
* the sample exempts every Job with a JobSet as its controller owner ("exclude-jobset-owned",
  :95-100), which anyone creating a Job can claim by writing the ownerReference; here only the JobSet
  controller's own Jobs are exempt: requests by a service account of its namespace `jobset-system`
  (where no team may run anything) for a Job a JobSet controls;
* it is bound to the teams' namespaces by name, not by a label a namespace's editor could add.

The alternative, Kueue's `manageJobsWithoutQueueName: true` with `managedJobsNamespaceSelector` on the
team namespaces ("Setup manageJobsWithoutQueueName", manage_jobs_without_queue_name.md:42-46), would
suspend such a Job forever instead of refusing it, and is one global switch over every framework the
chart enables (plain Pods, Deployments, StatefulSets included) rather than a rule on two kinds.

What it does not cover: Pods and other Kueue frameworks (a team member may create neither,
team_access.py), and what IAM lets a member do beyond RBAC (docs/security.md).
"""

from typing import TYPE_CHECKING, Any, cast

from ..gpudirect.admission_common import API_VERSION, binding, cel

if TYPE_CHECKING:
    import pulumi

QUEUE_POLICY = "gke-gpu-team-queue-name"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Where the JobSet chart runs its controller (batch_queues.batch_controllers).
JOBSET_NAMESPACE = "jobset-system"
JOBSET_GROUP = "jobset.x-k8s.io"
# The JobSet version the program installs and emits (nccl_allreduce.JOBSET_API); with the default
# matchPolicy (Equivalent) a request through another served version is converted and sent too.
JOBSET_VERSION = "v1alpha2"

__all__ = ["API_VERSION", "QUEUE_POLICY", "binding", "queue_name_policy"]


def queue_name_policy(local_queues: dict[str, list[str]]) -> dict[str, Any]:
    """The policy's spec: in each namespace of `local_queues` (namespace -> its LocalQueues), a Job or
    JobSet is created or updated only with the queue-name label naming one of them."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for namespace, queues in sorted(local_queues.items()):
        groups.setdefault(tuple(sorted(set(queues))), []).append(namespace)
    validations: list[dict[str, str]] = [
        {
            "expression": "variables.queue != ''",
            "message": f"a Job or JobSet in a team's namespace runs only through Kueue: label it "
            f"{QUEUE_LABEL} with one of the namespace's LocalQueues (kubectl get localqueues)",
        }
    ]
    for names, namespaces in groups.items():
        validations.append(
            {
                "expression": f"variables.queue == '' || !(request.namespace in {cel(namespaces)}) || "
                f"variables.queue in {cel(list(names))}",
                "message": f"{QUEUE_LABEL} in {', '.join(namespaces)} names one of {', '.join(names)}, "
                "the LocalQueues there",
            }
        )
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": ["batch"],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["jobs"],
                },
                {
                    "apiGroups": [JOBSET_GROUP],
                    "apiVersions": [JOBSET_VERSION],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["jobsets"],
                },
            ]
        },
        "matchConditions": [
            {
                "name": "not-the-jobset-controllers-own-job",
                "expression": "!(request.userInfo.username.startsWith("
                f"{cel(f'system:serviceaccount:{JOBSET_NAMESPACE}:')}) && "
                "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
                f"o.apiVersion.startsWith({cel(JOBSET_GROUP + '/')}) && o.kind == 'JobSet' && "
                "has(o.controller) && o.controller))",
            }
        ],
        "variables": [
            {
                "name": "queue",
                "expression": f"has(object.metadata.labels) && {cel(QUEUE_LABEL)} in object.metadata.labels "
                f"? object.metadata.labels[{cel(QUEUE_LABEL)}] : ''",
            }
        ],
        "validations": validations,
    }


def queue_name_binding(namespaces: list[str]) -> dict[str, Any]:
    """The Deny binding to the teams' namespaces, by name."""
    return binding(QUEUE_POLICY, sorted(set(namespaces)))


def declare_queue_name_policy(
    name: str, local_queues: dict[str, list[str]], opts: "pulumi.ResourceOptions"
) -> list["pulumi.Resource"]:
    """The policy and its binding, with `opts` (the parent, and the charts to wait for)."""
    import pulumi
    import pulumi_kubernetes as k8s

    from ..core.k8s import app_labels

    labels = app_labels(QUEUE_POLICY, component="batch")
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        f"{name}-{QUEUE_POLICY}",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=QUEUE_POLICY, labels=labels),
        spec=cast(Any, queue_name_policy(local_queues)),
        opts=opts,
    )
    bound = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{name}-{QUEUE_POLICY}-binding",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=QUEUE_POLICY, labels=labels),
        spec=cast(Any, queue_name_binding(list(local_queues))),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])),
    )
    return [policy, bound]


def local_queues_by_namespace(queues: list[str]) -> dict[str, list[str]]:
    """`<namespace>/<LocalQueue>` entries grouped by namespace."""
    found: dict[str, list[str]] = {}
    for entry in queues:
        namespace, _, queue = entry.partition("/")
        found.setdefault(namespace, []).append(queue)
    return found
