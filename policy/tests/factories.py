"""Resources and argument bags for the policy tests: real pulumi-policy objects, compliant by default."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.gke_gpu_policies.constants import SHARING_TRUSTED_LABEL
from policy.gke_gpu_policies.props import OFFLINE_UNKNOWN

PROJECT = "gke-gpu"
NODE_SA = "gpu-prod-nodes@example-gpu-prod.iam.gserviceaccount.com"

# The two spellings of "not known yet": the offline render's, and a real preview's (a sentinel behind
# pulumi-policy's proxy, which raises UnknownValueError when read).
OFFLINE = "offline"
ENGINE = "engine"
UNKNOWN_KINDS = (OFFLINE, ENGINE)


def urn(resource_type: str, name: str, stack: str = "prod") -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{resource_type}::{name}"


def unknown(kind: str) -> str:
    return OFFLINE_UNKNOWN if kind == OFFLINE else UNKNOWN_STRING_VALUE


def engine(props: dict[str, Any]) -> Any:
    """Props as pulumi-policy hands them to a validator during `pulumi preview`."""
    return unknown_checking_proxy(copy.deepcopy(props))


def options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def resource_args(
    resource_type: str,
    props: dict[str, Any],
    *,
    name: str = "res",
    stack: str = "prod",
    config: dict[str, Any] | None = None,
    proxy: bool = True,
) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        resource_type,
        engine(props) if proxy else props,
        urn(resource_type, name, stack),
        name,
        options(),
        None,
        config,
    )


def policy_resource(
    resource_type: str, name: str, props: dict[str, Any], stack: str = "prod"
) -> PolicyResource:
    return PolicyResource(
        resource_type, engine(props), urn(resource_type, name, stack), name, options(), None, None, [], {}
    )


def stack_args(
    resources: Sequence[tuple[str, str, dict[str, Any]]],
    *,
    stack: str = "prod",
    config: dict[str, Any] | None = None,
) -> StackValidationArgs:
    return StackValidationArgs([policy_resource(t, n, p, stack) for t, n, p in resources], config)


Validator = Callable[[Any, Callable[..., None]], Any]


def violations(validator: Validator, args: Any) -> list[str]:
    """The messages a validator reports (asserting it reports no URN for a resource policy)."""
    found: list[tuple[str, str | None]] = []

    def report_violation(message: str, urn: str | None = None) -> None:
        assert isinstance(message, str) and message
        found.append((message, urn))

    assert validator(args, report_violation) is None
    return [message for message, _ in found]


DELETE = object()


def set_path(data: dict[str, Any], path: str | tuple[str, ...], value: Any) -> dict[str, Any]:
    """Set (or, with value DELETE, remove) a path (dotted, or a tuple of keys) in a copy of data."""
    data = copy.deepcopy(data)
    parts = path.split(".") if isinstance(path, str) else list(path)
    target: Any = data
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
    last = parts[-1]
    if value is DELETE:
        if isinstance(target, list):
            del target[int(last)]
        else:
            target.pop(last, None)
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return data


def gpu_pool(**changes: Any) -> dict[str, Any]:
    """A compliant GPU NodePool's inputs (prod's L4 pool); `changes` maps dotted paths to values."""
    props: dict[str, Any] = {
        "cluster": "gpu-prod",
        "location": "us-central1",
        "name": "l4-serving",
        "nodeLocations": ["us-central1-a", "us-central1-b", "us-central1-c"],
        "autoscaling": {"locationPolicy": "ANY", "totalMinNodeCount": 0, "totalMaxNodeCount": 4},
        "nodeConfig": {
            "machineType": "g2-standard-8",
            "spot": False,
            "guestAccelerators": [
                {
                    "type": "nvidia-l4",
                    "count": 1,
                    "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
                }
            ],
            "labels": {},
            "serviceAccount": NODE_SA,
            "shieldedInstanceConfig": {"enableSecureBoot": True, "enableIntegrityMonitoring": True},
            "workloadMetadataConfig": {"mode": "GKE_METADATA"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
        },
    }
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


def cpu_pool(**changes: Any) -> dict[str, Any]:
    """A compliant non-GPU NodePool's inputs (prod's system pool)."""
    props = gpu_pool(**{"nodeConfig.guestAccelerators": DELETE, "nodeConfig.taints": DELETE})
    props["name"] = "system"
    props.pop("nodeLocations")
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


def shared_pool(strategy: str = "TIME_SHARING", **changes: Any) -> dict[str, Any]:
    props = gpu_pool(
        **{
            "nodeConfig.guestAccelerators.0.gpuSharingConfig": {
                "gpuSharingStrategy": strategy,
                "maxSharedClientsPerGpu": 2,
            },
            f"nodeConfig.labels.{SHARING_TRUSTED_LABEL}": "true",
        }
    )
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


def standard_cluster(**changes: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": "gpu-prod",
        "location": "us-central1",
        "deletionProtection": True,
        "enableShieldedNodes": True,
        "removeDefaultNodePool": True,
        "workloadIdentityConfig": {"workloadPool": "example-gpu-prod.svc.id.goog"},
        "nodeConfig": {
            "serviceAccount": NODE_SA,
            "shieldedInstanceConfig": {"enableSecureBoot": True, "enableIntegrityMonitoring": True},
            "workloadMetadataConfig": {"mode": "GKE_METADATA"},
        },
    }
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


def autopilot_cluster(**changes: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": "gpu-dev",
        "location": "us-central1",
        "enableAutopilot": True,
        "deletionProtection": False,
        "clusterAutoscaling": {"autoProvisioningDefaults": {"serviceAccount": NODE_SA}},
    }
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def gpu_pod_spec(**changes: Any) -> dict[str, Any]:
    """A compliant Pod spec with one container asking for one GPU."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                "resources": {
                    "limits": {"cpu": "100m", "nvidia.com/gpu": "1"},
                    "requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                },
            }
        ],
        "tolerations": [GPU_TOLERATION],
    }
    for path, value in changes.items():
        spec = set_path(spec, path, value)
    return spec


# Workload type -> where its Pod spec goes.
WORKLOAD_TYPES = {
    "kubernetes:core/v1:Pod": "spec",
    "kubernetes:batch/v1:Job": "spec.template.spec",
    "kubernetes:batch/v1:CronJob": "spec.jobTemplate.spec.template.spec",
    "kubernetes:apps/v1:Deployment": "spec.template.spec",
    "kubernetes:apps/v1:DaemonSet": "spec.template.spec",
    "kubernetes:apps/v1:StatefulSet": "spec.template.spec",
    "kubernetes:apps/v1:ReplicaSet": "spec.template.spec",
}
JOB = "kubernetes:batch/v1:Job"


def workload(resource_type: str = JOB, pod_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A workload object's inputs with this Pod spec (a compliant one by default)."""
    props: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": resource_type.rsplit(":", 1)[-1],
        "metadata": {"name": "cuda-job", "namespace": "gpu-samples"},
    }
    return set_path(
        props, WORKLOAD_TYPES[resource_type], pod_spec if pod_spec is not None else gpu_pod_spec()
    )


# --------------------------------------------------------------------------------------------------
# Scale-out: GPUDirect pools, Kueue objects, JobSets.

RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def gpudirect_pool(**changes: Any) -> dict[str, Any]:
    """A compliant GPUDirect-TCPXO NodePool: 8 extra NICs, one zone, compact placement."""
    props = gpu_pool(
        **{
            "name": "h100-mega",
            "nodeLocations": ["us-central1-a"],
            "placementPolicy": {"type": "COMPACT"},
            "nodeConfig.machineType": "a3-megagpu-8g",
            "nodeConfig.guestAccelerators.0.type": "nvidia-h100-mega-80gb",
            "nodeConfig.guestAccelerators.0.count": 8,
            "networkConfig": {
                "additionalNodeNetworkConfigs": [
                    {"network": f"gpu-prod-tcpxo-{i}", "subnetwork": f"gpu-prod-tcpxo-{i}"}
                    for i in range(1, 9)
                ]
            },
        }
    )
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


def resource_flavor(pool: str = "l4-serving", *, name: str | None = None, **changes: Any) -> dict[str, Any]:
    """A ResourceFlavor as GpuBatchQueues declares it: `gpu-<pool>`, selecting the pool's nodes."""
    props: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name or f"gpu-{pool}"},
        "spec": {
            "nodeLabels": {
                "cloud.google.com/gke-nodepool": pool,
                "cloud.google.com/gke-accelerator": "nvidia-l4",
            },
            "tolerations": [GPU_TOLERATION],
        },
    }
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


def cluster_queue(*flavors: str, name: str = "gpu-l4-serving", **changes: Any) -> dict[str, Any]:
    """A ClusterQueue whose one resource group lists these flavors, each with a GPU quota."""
    props: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}
                        for flavor in flavors
                    ],
                }
            ],
        },
    }
    for path, value in changes.items():
        props = set_path(props, path, value)
    return props


def jobset(pod_spec: dict[str, Any] | None = None, *, queue: str | None = "gpu-l4-serving") -> dict[str, Any]:
    """A JobSet with one replicated job of 2 Pods (this Pod spec, a GPU one by default), queued in
    LocalQueue `queue` (None: no queue label)."""
    labels = {"app.kubernetes.io/part-of": "gke-gpu"}
    if queue is not None:
        labels["kueue.x-k8s.io/queue-name"] = queue
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "nccl-allreduce", "namespace": "gpu-samples", "labels": labels},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {"spec": pod_spec if pod_spec is not None else gpu_pod_spec()},
                        }
                    },
                }
            ]
        },
    }


def check(validator: Any, resource_type: str, resource_props: dict[str, Any], **kwargs: Any) -> list[str]:
    """The messages one resource validator reports for one resource."""
    return violations(validator, resource_args(resource_type, resource_props, **kwargs))


def one(messages: list[str], policy: str, *fragments: str) -> str:
    """The single message, which names the rule and contains every fragment."""
    assert len(messages) == 1, messages
    message = messages[0]
    assert message.endswith(f"[{policy}]"), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message
