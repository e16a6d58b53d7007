"""The all-reduce test's JobSet and Pod as plain manifests (camelCase), built from NcclAllReduce's checked
args: the flavour's Pod parts, the containers (the GPU health gate, the test), the Pod spec and the
JobSet's spec. Pure: workloads/nccl_allreduce.py declares them."""

import hashlib
from typing import Any

from ..core.common import GPU_RESOURCE
from ..core.data import SCRIPTS_DIR
from ..core.k8s import (
    GKE_DRIVER_MOUNT,
    NONROOT_ID,
    SCRIPT_HASH_ANNOTATION,
    image_version,
)
from ..dra.claims import (
    ARM64_TOLERATION,
    GPU_CLAIM,
    channel_claims,
    container_claim,
    gpu_claim_template_name,
    pod_claim,
)
from ..gpu.scheduling import QUEUED_TAINT_KEY, QUEUED_TOLERATION
from ..gpudirect.pod_parts import dranet_pod_parts, gpudirect_pod_parts, plain_tcp_pod_parts
from .batch_teams import PREFERRED_TOPOLOGY_ANNOTATION, PREFERRED_TOPOLOGY_LEVEL
from .nccl_allreduce_args import (
    REPLICATED_JOB,
    RUNNERS,
    BandwidthFloor,
    NcclAllReduceSpec,
    jobset_name,
    machine_of,
    max_message_bytes,
    settings_env,
    size_text,
)
from .nccl_allreduce_network import by_count

SCRIPT = (SCRIPTS_DIR / "nccl_allreduce.sh").read_text(encoding="utf-8")
SCRIPT_FILE = "nccl_allreduce.sh"
SCRIPT_DIR = "/opt/nccl-allreduce"
SCRIPT_SHA256 = hashlib.sha256(SCRIPT.encode()).hexdigest()
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
CONTAINER = "main"
HEALTH_CONTAINER = "gpu-health"
# A Job's deadline starts when Kueue admits (unsuspends) it. Time in the Kueue queue does not count,
# but the wait for nodes does wherever admission is by quota alone (not queued provisioning): scale-up
# from zero, or a flex-start pool waiting for capacity. So the Job gets four hours, and the script,
# which counts from its own start, stops itself after 55 minutes of running and says why (the wait
# for its peers included). A queued pool's ProvisioningRequest asks GKE for nodes for RUN_SECONDS
# (its maxRunDurationSeconds, counted from when the nodes are provisioned): the script's limit plus
# the time before the script starts on fresh nodes, pulling Google's test image (several GB) and the
# GPU health gate. With the script's limit alone (3600 for 3300), a slow pull let GKE reclaim the
# nodes under a run that was still within its own deadline.
JOB_DEADLINE_SECONDS = 4 * 3600
SCRIPT_DEADLINE_SECONDS = 3300
# How long rank 0 waits for the other Pods' sshd (image pulls of several GB on fresh nodes).
PEER_WAIT_SECONDS = 1200
# Before the script starts: the image pull and the health gate (a judgement, as PEER_WAIT_SECONDS:
# the same pulls, with room for the gate; no Google figure).
PULL_AND_GATE_SECONDS = 1800
RUN_SECONDS = PULL_AND_GATE_SECONDS + SCRIPT_DEADLINE_SECONDS
JOBSET_TTL_SECONDS = 24 * 3600  # long enough to read the result the morning after
RUNTIME_DEFAULT = {"type": "RuntimeDefault"}
POD_SECURITY_REASONS_ANNOTATION = "gke-gpu/pod-security-reasons"


def pod_parts(spec: NcclAllReduceSpec) -> dict[str, Any]:
    """The flavour's Pod pieces (gpudirect/pod_parts.py), or the plain-TCP ones."""
    if spec.gpudirect and spec.dranet:
        return by_count(dranet_pod_parts(spec.gpudirect, container=CONTAINER), spec.gpudirect)
    if spec.gpudirect:
        return gpudirect_pod_parts(spec.gpudirect, container=CONTAINER)
    return plain_tcp_pod_parts()


def main_resources(spec: NcclAllReduceSpec) -> dict[str, dict[str, str]]:
    """The test container's share of its node. Requests (what Kueue counts against the queue's quota
    and the scheduler against the node) stay well under the node: a quarter of its vCPUs, an eighth of
    its memory. The CPU limit is the whole node: a lower one would throttle NCCL's network threads;
    the memory limit, half the node, also bounds the memory-backed /dev/shm."""
    _, machine = machine_of(spec)
    gpus = gpu_resource(spec)
    return {
        "requests": {
            "cpu": str(max(1, machine.vcpus // 4)),
            "memory": f"{max(1, int(machine.memory_gb // 8))}Gi",
            "ephemeral-storage": "1Gi",
            **gpus,
        },
        "limits": {
            "cpu": str(machine.vcpus),
            "memory": f"{max(2, int(machine.memory_gb // 2))}Gi",
            "ephemeral-storage": "10Gi",
            **gpus,
        },
    }


def gpu_resource(spec: NcclAllReduceSpec) -> dict[str, str]:
    """Every GPU of the node as a device-plugin resource, or nothing on a DRA pool (where the GPUs
    are the Pod's claim `gpus`, which no device plugin advertises as `nvidia.com/gpu`)."""
    return {} if spec.dra_gpus else {GPU_RESOURCE: str(spec.gpus_per_node)}


def health_container(spec: NcclAllReduceSpec, image: str, mount: dict[str, Any]) -> dict[str, Any]:
    """The GPU health gate: asks for every GPU of the node, so GKE's device plugin mounts the driver
    (nvidia-smi) at /usr/local/nvidia; runs as non-root with nothing but that. A failed check fails
    the Pod before sshd or NCCL start. On a DRA pool it names the Pod's GPU claim instead (containers
    of a Pod may share a claim) and takes nvidia-smi from PATH, where the DRA driver's CDI edits put
    the driver's binaries (UNVERIFIED on GKE's COS layout: docs/configuration.md, "DRA GPUs")."""
    gpus = str(spec.gpus_per_node)
    resources: dict[str, Any] = {
        "requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "64Mi", **gpu_resource(spec)},
        "limits": {"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "256Mi", **gpu_resource(spec)},
    }
    if spec.dra_gpus:
        resources["claims"] = [container_claim(GPU_CLAIM)]
    return {
        "name": HEALTH_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", f"{SCRIPT_DIR}/{SCRIPT_FILE}", "health"],
        "env": settings_env(
            {
                "NCCL_ALLREDUCE_GPUS": gpus,
                "NVIDIA_SMI": "nvidia-smi" if spec.dra_gpus else f"{GKE_DRIVER_MOUNT}/bin/nvidia-smi",
                # GKE's device plugin mounts the driver but sets no environment: nvidia-smi finds
                # libnvidia-ml only through this (as Google's and cluster-toolkit's health checks).
                "LD_LIBRARY_PATH": f"{GKE_DRIVER_MOUNT}/lib64",
                "HOME": "/tmp",
            }
        ),
        "resources": resources,
        "securityContext": {
            "runAsUser": NONROOT_ID,
            "runAsGroup": NONROOT_ID,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": dict(RUNTIME_DEFAULT),
        },
        "volumeMounts": [mount],
    }


def main_container(
    spec: NcclAllReduceSpec, parts: dict[str, Any], floor: BandwidthFloor, jobset: str, mount: dict[str, Any]
) -> dict[str, Any]:
    """The test: root (sshd and mpirun need it), never privileged, the flavour's mounts, NCCL env and
    capabilities, seccomp RuntimeDefault."""
    accelerator, _ = machine_of(spec)
    runner = RUNNERS[spec.transport]
    env = list(parts["env"])
    if not any(e["name"] == "LD_LIBRARY_PATH" for e in env):
        # The driver GKE's device plugin mounts (libcuda), as Google's test Pods set it.
        env.append({"name": "LD_LIBRARY_PATH", "value": f"{GKE_DRIVER_MOUNT}/lib64"})
    env += settings_env(
        {
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "NCCL_ALLREDUCE_NODES": str(spec.nodes),
            "NCCL_ALLREDUCE_GPUS": str(spec.gpus_per_node),
            "NCCL_ALLREDUCE_JOBSET": jobset,
            "NCCL_ALLREDUCE_REPLICATED_JOB": REPLICATED_JOB,
            "NCCL_ALLREDUCE_SUBDOMAIN": jobset,
            "NCCL_ALLREDUCE_FLOOR_GBPS": f"{floor.gbps:g}",
            "NCCL_ALLREDUCE_FLOOR_NOTE": floor.note,
            "NCCL_ALLREDUCE_TESTS_DIR": runner.tests_dir,
            "NCCL_ALLREDUCE_MAX_BYTES": size_text(max_message_bytes(spec.transport, accelerator.memory_gb)),
            "NCCL_ALLREDUCE_SSHD": runner.sshd,
            "NCCL_ALLREDUCE_SETUP": parts["ncclSetup"],
            "NCCL_ALLREDUCE_LAUNCH_PREFIX": runner.launch_prefix,
            "NCCL_ALLREDUCE_DEADLINE_SECONDS": str(SCRIPT_DEADLINE_SECONDS),
            "NCCL_ALLREDUCE_PEER_WAIT_SECONDS": str(PEER_WAIT_SECONDS),
        }
    )
    security = {**parts["securityContext"], "seccompProfile": dict(RUNTIME_DEFAULT)}
    resources: dict[str, Any] = main_resources(spec)
    # The container names the Pod's claims: its GPUs on a DRA pool, the rack's ComputeDomain
    # channel, DRANET's RDMA NICs.
    claims = [
        *([container_claim(GPU_CLAIM)] if spec.dra_gpus else []),
        *(channel_claims(jobset)[1] if spec.compute_domain else []),
        *parts.get("claims", []),
    ]
    if claims:
        resources["claims"] = claims
    return {
        "name": CONTAINER,
        "image": runner.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", f"{SCRIPT_DIR}/{SCRIPT_FILE}", "run"],
        "env": env,
        "resources": resources,
        "securityContext": security,
        "volumeMounts": [*parts["volumeMounts"], mount],
    }


def nccl_pod_spec(spec: NcclAllReduceSpec, parts: dict[str, Any], floor: BandwidthFloor) -> dict[str, Any]:
    """Every Pod's spec (camelCase, as in a manifest)."""
    jobset = jobset_name(spec.pool)
    image = RUNNERS[spec.transport].image
    mount = {"name": "nccl-allreduce-script", "mountPath": SCRIPT_DIR, "readOnly": True}
    tolerations = [_toleration(t) for t in spec.tolerations]
    if spec.queued and not any(t.get("key") == QUEUED_TAINT_KEY for t in tolerations):
        tolerations.append(dict(QUEUED_TOLERATION))
    if spec.compute_domain and ARM64_TOLERATION not in tolerations:
        tolerations.append(dict(ARM64_TOLERATION))
    sidecars = parts["initContainers"]
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
        "nodeSelector": dict(spec.node_selector),
        "tolerations": tolerations,
        # The health gate first, then the flavour's native sidecar (RxDM), then the test.
        "initContainers": [health_container(spec, image, mount), *sidecars],
        "containers": [main_container(spec, parts, floor, jobset, mount)],
        "volumes": [
            *parts["volumes"],
            {
                "name": "nccl-allreduce-script",
                "configMap": {"name": f"{jobset}-script", "defaultMode": 0o444},
            },
        ],
    }
    # A DRA pool's GPUs and a rack's ComputeDomain channel (dra/claims.py), DRANET's RDMA NICs
    # (gpudirect/dranet.py).
    resource_claims = [
        *([pod_claim(GPU_CLAIM, gpu_claim_template_name(spec.gpus_per_node))] if spec.dra_gpus else []),
        *(channel_claims(jobset)[0] if spec.compute_domain else []),
        *parts.get("resourceClaims", []),
    ]
    if resource_claims:
        pod["resourceClaims"] = resource_claims
    if not sidecars:
        # Pod-wide RuntimeDefault where no RxDM sidecar runs (its seccomp needs are not documented:
        # Google's manifests leave it unconfined, so it keeps what gpudirect/pod_parts.py gives it).
        pod["securityContext"] = {"seccompProfile": dict(RUNTIME_DEFAULT)}
    if not pod["nodeSelector"]:
        del pod["nodeSelector"]
    if not pod["tolerations"]:
        del pod["tolerations"]
    return pod


def _toleration(toleration: Any) -> dict[str, Any]:
    """A checked toleration as Kubernetes writes it (camelCase, only the given fields)."""
    given = toleration.model_dump(exclude_none=True)
    if "toleration_seconds" in given:
        given["tolerationSeconds"] = given.pop("toleration_seconds")
    return given


def jobset_spec(
    spec: NcclAllReduceSpec,
    jobset: str,
    parts: dict[str, Any],
    pod_spec: dict[str, Any],
    labels: dict[str, str],
) -> dict[str, Any]:
    return {
        "ttlSecondsAfterFinished": JOBSET_TTL_SECONDS,
        # One failed Pod fails the test: no restart of the JobSet, no retry of a Pod.
        "failurePolicy": {"maxRestarts": 0},
        # Pod i answers at <jobset>-<replicatedJob>-0-<i>.<subdomain>, before it is ready too.
        "network": {"enableDNSHostnames": True, "subdomain": jobset, "publishNotReadyAddresses": True},
        "replicatedJobs": [
            {
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {
                    "spec": {
                        "parallelism": spec.nodes,
                        "completions": spec.nodes,
                        "completionMode": "Indexed",
                        "backoffLimit": 0,
                        "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
                        "template": {
                            "metadata": {
                                "labels": {
                                    **labels,
                                    "app.kubernetes.io/version": image_version(RUNNERS[spec.transport].image),
                                },
                                "annotations": {
                                    **parts["annotations"],
                                    SCRIPT_HASH_ANNOTATION: SCRIPT_SHA256,
                                    **(
                                        {PREFERRED_TOPOLOGY_ANNOTATION: PREFERRED_TOPOLOGY_LEVEL}
                                        if spec.topology
                                        else {}
                                    ),
                                },
                            },
                            "spec": pod_spec,
                        },
                    }
                },
            }
        ],
    }
