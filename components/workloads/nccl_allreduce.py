"""NcclAllReduce: the multi-node NCCL all-reduce that proves a GPU pool's network, a JobSet queued by
Kueue. Args, the image per transport and the bandwidth floors: workloads/nccl_allreduce_args.py. The script
the Pods run: scripts/nccl_allreduce.sh."""

from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import (
    SCRIPT_HASH_ANNOTATION,
    SKIP_AWAIT,
    app_labels,
    pod_security_labels,
    pod_security_level,
    selector_labels,
)
from ..dra.claims import (
    COMPUTE_DOMAIN_API,
    COMPUTE_DOMAIN_KIND,
    compute_domain_spec,
    gpu_claim_template_name,
    gpu_claim_template_spec,
)
from .batch_queues import KUEUE_API
from .nccl_allreduce_args import (
    MAX_RUN_DURATION_ANNOTATION,
    NcclAllReduceArgs,
    NcclAllReduceSpec,
    floor_for,
    jobset_name,
    nccl_commands,
    nccl_rules,
)
from .nccl_allreduce_network import network_policy_spec, rdma_claim_template
from .nccl_allreduce_pod import (
    CONTAINER,
    JOBSET_API,
    POD_SECURITY_REASONS_ANNOTATION,
    RUN_SECONDS,
    SCRIPT,
    SCRIPT_FILE,
    SCRIPT_SHA256,
    jobset_spec,
    nccl_pod_spec,
    pod_parts,
)
from .queue_admission import QUEUE_LABEL


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
