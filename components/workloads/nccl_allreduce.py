"""NcclAllReduce: the multi-node NCCL all-reduce that proves a GPU pool's network, a JobSet queued by
Kueue. Args, the image per transport and the bandwidth floors: workloads/nccl_allreduce_args.py. The script
the Pods run: scripts/nccl_allreduce.sh."""

import hashlib
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from ..core.common import GPU_RESOURCE
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.data import SCRIPTS_DIR
from ..core.k8s import (
    GKE_DRIVER_MOUNT,
    NONROOT_ID,
    SCRIPT_HASH_ANNOTATION,
    SKIP_AWAIT,
    app_labels,
    image_version,
    pod_security_labels,
    pod_security_level,
    selector_labels,
)
from ..dra.claims import (
    ARM64_TOLERATION,
    COMPUTE_DOMAIN_API,
    COMPUTE_DOMAIN_KIND,
    GPU_CLAIM,
    channel_claims,
    compute_domain_spec,
    container_claim,
    gpu_claim_template_name,
    gpu_claim_template_spec,
    pod_claim,
)
from ..gpu.scheduling import QUEUED_TAINT_KEY, QUEUED_TOLERATION
from ..gpudirect.dranet import dranet_pod_parts
from ..gpudirect.pod_parts import gpudirect_pod_parts, plain_tcp_pod_parts
from .batch_queues import KUEUE_API
from .batch_teams import PREFERRED_TOPOLOGY_ANNOTATION, PREFERRED_TOPOLOGY_LEVEL
from .nccl_allreduce_args import (
    MAX_RUN_DURATION_ANNOTATION,
    REPLICATED_JOB,
    RUNNERS,
    BandwidthFloor,
    NcclAllReduceArgs,
    NcclAllReduceSpec,
    floor_for,
    jobset_name,
    machine_of,
    max_message_bytes,
    nccl_commands,
    nccl_rules,
    settings_env,
    size_text,
)
from .nccl_allreduce_network import by_count, network_policy_spec, rdma_claim_template
from .queue_admission import QUEUE_LABEL

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


class NcclAllReduce(GkeGpuComponent[NcclAllReduceSpec]):
    """A 2-node (or N-node) NCCL all-reduce on one GPU pool: a JobSet of one Indexed Job, one Pod per
    node taking every GPU of its node, queued by Kueue (the LocalQueue it makes points at the pool's
    ClusterQueue, which admits all the Pods at once or none).

    Each Pod first checks its node's GPUs (count, uncorrectable ECC errors), then starts sshd; rank 0
    waits for its peers, runs nccl-tests' all_reduce_perf across every GPU of every node with mpirun
    over ssh, prints the out-of-place bus bandwidth at the largest message with the floor it is judged
    by (and where that floor comes from), and fails below it; the other ranks serve until rank 0 is
    done. GPUDirect pools get their flavour's Pod pieces (network annotations, the RxDM sidecar, the
    plugin's libraries and NCCL settings: gpudirect/pod_parts.py); other pools run NCCL over TCP sockets.

    Bounded: no retry (Job backoffLimit 0, JobSet maxRestarts 0), an hour's deadline, deleted a day
    after it finishes; `pulumi up` does not wait for it. A change of the script or the spec replaces
    the JobSet, so the test runs again. The namespace is the component's own, at the least Pod
    Security level the Pods need; a NetworkPolicy lets the Pods reach each other and DNS, nothing
    else."""

    jobset_name: pulumi.Output[str]
    """The JobSet: `nccl-<pool>`."""
    namespace: pulumi.Output[str]
    """The test's namespace."""
    commands: pulumi.Output[dict[str, str]]
    """kubectl commands: wait, logs (rank 0's Pod), result (its result line), pods, queue."""
    floor_gbps: pulumi.Output[float]
    """The bus bandwidth floor the run is judged by, in GB/s."""

    _args_model = NcclAllReduceSpec
    _args_rules = staticmethod(nccl_rules)
    _args_type = NcclAllReduceArgs

    def __init__(
        self,
        name: str,
        /,
        args: NcclAllReduceArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        jobset = jobset_name(spec.pool)
        floor = floor_for(spec.machine_type, spec.transport, spec.min_bus_bandwidth_gbps, spec.accelerator)
        parts = pod_parts(spec)
        pod_spec = nccl_pod_spec(spec, parts, floor)
        level, reasons = pod_security_level(pod_spec)
        labels = app_labels(jobset, component="nccl-allreduce")
        child = pulumi.ResourceOptions(parent=self)

        self.namespace_object = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=spec.namespace,
                labels={
                    **app_labels(spec.namespace, component="nccl-allreduce"),
                    # The least level the Pods pass: 'privileged' for GPUDirect (host paths to the
                    # node's NCCL plugin and driver libraries, the RxDM sidecar's host /sys and
                    # /proc/sys and NET_ADMIN, TCPX's IPC_LOCK), 'baseline' for plain TCP (root for
                    # sshd and mpirun, the runtime's default capabilities). Warnings and audit
                    # entries report what the next stricter level would refuse.
                    **pod_security_labels(level, "baseline" if level == "privileged" else "restricted"),
                },
                annotations={POD_SECURITY_REASONS_ANNOTATION: "; ".join(reasons) or "none"},
            ),
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_object])
        if spec.dranet and spec.gpudirect:
            # The NICs by count: Kueue admits no claim of default-rdma's All (nccl_allreduce_network.py).
            rdma_claim_template(f"{name}-rdma-claim", spec.namespace, labels, spec.gpudirect, in_namespace)
        self.gpu_claim_template: k8s.resource.v1.ResourceClaimTemplate | None = None
        if spec.dra_gpus:
            # On a DRA pool each Pod's GPUs are a claim made from this template (dra/claims.py).
            template = gpu_claim_template_name(spec.gpus_per_node)
            self.gpu_claim_template = k8s.resource.v1.ResourceClaimTemplate(
                f"{name}-gpu-claim",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=template, namespace=spec.namespace, labels=labels),
                spec=cast(Any, gpu_claim_template_spec(spec.gpus_per_node)),
                opts=in_namespace,
            )
        self.local_queue = k8s.apiextensions.CustomResource(
            f"{name}-local-queue",
            api_version=KUEUE_API,
            kind="LocalQueue",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=jobset, namespace=spec.namespace, labels=labels),
            spec={"clusterQueue": spec.cluster_queue},
            opts=in_namespace,
        )
        self.script = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{jobset}-script", namespace=spec.namespace, labels=labels
            ),
            data={SCRIPT_FILE: SCRIPT},
            opts=in_namespace,
        )
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-network-policy",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=jobset, namespace=spec.namespace, labels=labels),
            spec=network_policy_spec(selector_labels(labels)),
            opts=in_namespace,
        )
        job_needs: list[pulumi.Resource] = [
            self.namespace_object,
            self.local_queue,
            self.script,
            self.network_policy,
        ]
        if self.gpu_claim_template is not None:
            job_needs.append(self.gpu_claim_template)
        self.compute_domain: k8s.apiextensions.CustomResource | None = None
        if spec.compute_domain:
            # The IMEX channel's ResourceClaimTemplate is the DRA driver's controller's, made from it.
            self.compute_domain = k8s.apiextensions.CustomResource(
                f"{name}-compute-domain",
                api_version=COMPUTE_DOMAIN_API,
                kind=COMPUTE_DOMAIN_KIND,
                metadata=k8s.meta.v1.ObjectMetaArgs(name=jobset, namespace=spec.namespace, labels=labels),
                spec=compute_domain_spec(jobset, spec.nodes),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[self.namespace_object],
                    # The CRD makes the spec immutable (CEL self == oldSelf): a change replaces it.
                    replace_on_changes=["spec"],
                    delete_before_replace=True,
                ),
            )
            job_needs.append(self.compute_domain)
        annotations = {**SKIP_AWAIT, SCRIPT_HASH_ANNOTATION: SCRIPT_SHA256}
        if spec.queued:
            # Kueue copies provreq.kueue.x-k8s.io/* annotations into the ProvisioningRequest: the
            # nodes are asked for as long as the test may run.
            annotations[MAX_RUN_DURATION_ANNOTATION] = str(RUN_SECONDS)
        self.jobset = k8s.apiextensions.CustomResource(
            f"{name}-jobset",
            api_version=JOBSET_API,
            kind="JobSet",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=jobset,
                namespace=spec.namespace,
                labels={**labels, QUEUE_LABEL: jobset},
                annotations=annotations,
            ),
            spec=jobset_spec(spec, jobset, parts, pod_spec, labels),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=job_needs,
                # A JobSet's Jobs are immutable and its name fixed: any change replaces it (and runs
                # the test again).
                replace_on_changes=["*"],
                delete_before_replace=True,
            ),
        )
        self.jobset_name = pulumi.Output.from_input(jobset)
        self.namespace = pulumi.Output.from_input(spec.namespace)
        self.commands = pulumi.Output.from_input(nccl_commands(jobset, spec.namespace, CONTAINER))
        self.floor_gbps = pulumi.Output.from_input(floor.gbps)
        self.register_outputs(
            {
                "jobsetName": self.jobset_name,
                "namespace": self.namespace,
                "commands": self.commands,
                "floorGbps": self.floor_gbps,
            }
        )


# -- The objects, as plain manifests (camelCase) ----------------------------------------------------


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
