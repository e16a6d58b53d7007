"""Sample GPU workloads that prove a pool works: nvidia-smi, CUDA vectorAdd, a PyTorch smoke test,
and a sharing demo whose Pods share one GPU. Every one is a bounded Job, so the pool goes back to
zero nodes when it is done."""

import hashlib
from collections.abc import Mapping
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from ..core import images
from ..core.common import GPU_RESOURCE
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.data import SCRIPTS_DIR
from ..core.k8s import (
    GKE_DRIVER_MOUNT,
    JOB_TTL_SECONDS,
    SCRIPT_HASH_ANNOTATION,
    SKIP_AWAIT,
    app_labels,
    deny_all_network_policy_spec,
    image_version,
    pod_security_labels,
    require_node_labels,
    restricted_container_security_context,
    restricted_pod_security_context,
    toleration_args,
)
from ..core.nodes import ARCH_LABEL
from ..dra.claims import (
    GPU_CLAIM,
    container_claim,
    gpu_claim_template_name,
    gpu_claim_template_spec,
    pod_claim,
)
from .samples_args import (
    GpuTargetSpec,
    SampleWorkloadsArgs,
    SampleWorkloadSpec,
    SampleWorkloadsSpec,
    namespace_of,
    object_name,
    sample_commands,
    sample_rules,
    sharing_clients,
)

SCRIPTS = SCRIPTS_DIR
# Read once, at import: the ConfigMap (pytorch-smoke) and the Job's command (sharing-demo) carry
# them as they are, so `kubectl get configmap -o yaml` and the rendered manifests read as code.
PYTORCH_SMOKE_SCRIPT = (SCRIPTS / "pytorch_smoke.py").read_text(encoding="utf-8")
SHARING_DEMO_SCRIPT = (SCRIPTS / "sharing_demo.sh").read_text(encoding="utf-8")
PYTORCH_SCRIPT_CONFIGMAP = "pytorch-smoke-script"
# Scale-up from zero (or a Spot retry) can take well over ten minutes for large GPUs.
JOB_DEADLINE_SECONDS = 3600
# How long each sharing-demo client keeps the shared GPU busy, so that the clients overlap.
SHARING_DEMO_SECONDS = 60
# `pulumi up` does not wait for the samples (SKIP_AWAIT): GPU capacity (Spot, scale-from-zero) must
# not make a deploy fail. Their results are read with the commands in the stack output
# `sampleWorkloads`.
# nvidia-smi comes with the driver, not the image: GKE mounts it in /usr/local/nvidia/bin, the NVIDIA
# container toolkit in /usr/bin. Appending keeps the image's own PATH first.
NVIDIA_SMI_PATH = f'PATH="$PATH:{GKE_DRIVER_MOUNT}/bin"; '
# The only writable place in a sample container (an emptyDir; the root filesystem is read-only), and
# the caches pointed at it: HOME, CUDA's JIT cache (PTX compiled for a GPU newer than the binary),
# and PyTorch's, Triton's and XDG's caches.
SCRATCH = "/tmp"
SCRATCH_ENV = {"HOME": SCRATCH, "CUDA_CACHE_PATH": f"{SCRATCH}/.nv/ComputeCache"}
PYTORCH_ENV = {
    "XDG_CACHE_HOME": f"{SCRATCH}/.cache",
    "TORCH_HOME": f"{SCRATCH}/torch",
    "TRITON_CACHE_DIR": f"{SCRATCH}/triton",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
# Images published for linux/amd64 only (pytorch/pytorch: issues 145716 and 157139). Where the target
# does not fix the node's architecture (the GPU nodes of an existing cluster), their Pods select amd64.
AMD64_ONLY_IMAGES = frozenset({images.PYTORCH, images.PYTORCH_BLACKWELL})
# The NetworkPolicy that denies all traffic to and from the samples' Pods (they need none).
DENY_ALL_POLICY = "deny-all"


class SampleWorkloads(GkeGpuComponent[SampleWorkloadsSpec]):
    """The sample Jobs, each pinned to its GPU pool, in a 'restricted' namespace whose traffic is
    denied both ways.

    Every Pod: `nvidia.com/gpu` limits (integers, requests equal), the GPU taint's toleration, the
    pool's node selectors (accelerator, Spot, sharing, MIG partition), the 'restricted' Pod
    Security settings (uid/gid 65532, non-root, no privilege escalation, no capabilities,
    RuntimeDefault seccomp) with a read-only root filesystem and an emptyDir at /tmp for scratch
    and caches, CPU and memory requests equal to limits, and a pinned image. Every Job retries once
    (Spot preemptions do not count, through a Pod failure policy), gives up after an hour and is
    deleted a day after it finishes. The MPS sharing demo alone runs in `<namespace>-mps`, which
    allows the hostIPC its MPS clients need.
    """

    namespace: pulumi.Output[str]
    """The samples' namespace (the MPS sharing demo's is `<namespace>-mps`)."""
    job_names: pulumi.Output[list[str]]
    """The samples' Job names, sorted: `<kind>-<target name>`."""

    _args_model = SampleWorkloadsSpec
    _args_rules = staticmethod(sample_rules)

    def __init__(
        self,
        name: str,
        /,
        args: SampleWorkloadsArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        self._name = name
        self._args = spec
        # Resources by namespace or Job name (not outputs: the schema would reference kubernetes').
        self.namespaces: dict[str, k8s.core.v1.Namespace] = {}
        self.network_policies: dict[str, k8s.networking.v1.NetworkPolicy] = {}
        base_namespace = spec.namespace
        for namespace in sorted({namespace_of(w, base_namespace) for w in spec.workloads} | {base_namespace}):
            base = namespace == base_namespace
            suffix = "" if base else "-mps"
            self.namespaces[namespace] = k8s.core.v1.Namespace(
                f"{name}-namespace{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=namespace,
                    labels={
                        **app_labels(namespace, component="gpu-samples"),
                        # Where 'privileged' is enforced (MPS's hostIPC), what breaks 'restricted'
                        # is still reported: a warning to the client and an audit log entry.
                        **pod_security_labels("restricted" if base else "privileged", "restricted"),
                    },
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.network_policies[namespace] = k8s.networking.v1.NetworkPolicy(
                f"{name}-deny-all{suffix}",
                metadata=self._meta(DENY_ALL_POLICY, "gpu-samples", namespace=namespace),
                spec=deny_all_network_policy_spec(),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[namespace]]),
            )
        # A ResourceClaimTemplate per GPU count the DRA targets ask for (in the base namespace: the
        # MPS namespace's targets share GPUs, which DRA does not).
        self.claim_templates: dict[int, k8s.resource.v1.ResourceClaimTemplate] = {}
        for gpus in sorted({w.target.gpus_per_pod for w in spec.workloads if w.target.dra_gpus}):
            template = gpu_claim_template_name(gpus)
            self.claim_templates[gpus] = k8s.resource.v1.ResourceClaimTemplate(
                f"{name}-claim-{template}",
                metadata=self._meta(template, "gpu-claim", namespace=base_namespace),
                spec=cast(Any, gpu_claim_template_spec(gpus)),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[base_namespace]]),
            )
        self.script: k8s.core.v1.ConfigMap | None = None
        if any(w.kind == "pytorch-smoke" for w in spec.workloads):
            self.script = k8s.core.v1.ConfigMap(
                f"{name}-pytorch-script",
                metadata=self._meta(PYTORCH_SCRIPT_CONFIGMAP, "pytorch-smoke", namespace=base_namespace),
                data={"smoke.py": PYTORCH_SMOKE_SCRIPT},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[base_namespace]]),
            )
        self.objects: dict[str, k8s.batch.v1.Job] = {}
        # Per Job: kubectl commands that wait for it, print its log and list its Pods.
        self.commands: dict[str, dict[str, str]] = {}
        for workload in spec.workloads:
            self.objects[object_name(workload)] = self._declare(workload)
            self.commands[object_name(workload)] = sample_commands(workload, base_namespace)
        self.namespace = pulumi.Output.from_input(base_namespace)
        self.job_names = pulumi.Output.from_input(sorted(self.objects))
        self.register_outputs({"namespace": self.namespace, "jobNames": self.job_names})

    # -- builders ---------------------------------------------------------------------------------

    def _meta(
        self,
        name: str,
        component: str,
        *,
        namespace: str,
        image: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> "k8s.meta.v1.ObjectMetaArgs":
        labels = app_labels(name, component=component, version=image_version(image) if image else None)
        labels.update(self._args.extra_labels)
        return k8s.meta.v1.ObjectMetaArgs(
            name=name,
            namespace=namespace,
            labels=labels,
            annotations=dict(annotations) if annotations else None,
        )

    def _declare(self, workload: SampleWorkloadSpec) -> "k8s.batch.v1.Job":
        target = workload.target
        if workload.kind == "nvidia-smi":
            image = images.CUDA_BASE
            command = ["sh", "-c", NVIDIA_SMI_PATH + "nvidia-smi && nvidia-smi -L"]
            container = self._container("nvidia-smi", image, target, command, cpu="100m", memory="256Mi")
            return self._job(workload, image, container)
        if workload.kind == "cuda-vector-add":
            image = images.CUDA_VECTOR_ADD
            container = self._container("vector-add", image, target, None, cpu="250m", memory="512Mi")
            return self._job(workload, image, container)
        if workload.kind == "pytorch-smoke":
            image = images.pytorch_image(target.accelerator)
            container = self._container(
                "pytorch",
                image,
                target,
                ["python", "/opt/smoke/smoke.py"],
                cpu="2",
                memory="8Gi",
                env=PYTORCH_ENV,
                mounts=[k8s.core.v1.VolumeMountArgs(name="script", mount_path="/opt/smoke", read_only=True)],
            )
            script = k8s.core.v1.VolumeArgs(
                name="script",
                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=PYTORCH_SCRIPT_CONFIGMAP),
            )
            digest = hashlib.sha256(PYTORCH_SMOKE_SCRIPT.encode()).hexdigest()
            return self._job(
                workload, image, container, volumes=[script], pod_annotations={SCRIPT_HASH_ANNOTATION: digest}
            )
        if workload.kind == "sharing-demo":
            return self._sharing_demo(workload)
        raise ValueError(f"unknown sample workload {workload.kind!r}")

    def _sharing_demo(self, workload: SampleWorkloadSpec) -> "k8s.batch.v1.Job":
        """`parallelism = completions = replicas` Pods, each holding one shared `nvidia.com/gpu`:
        each prints the GPU (or MIG slice) it was given and runs vectorAdd for a minute, so that
        clients on one GPU use it at the same time (`kubectl get pods -o wide` shows each one's node).

        MPS clients run as uid 65532 like every sample: NVIDIA MPS serves one Linux user per GPU at
        a time, so clients of another user wait (not verified on GKE's MPS daemon); run your MPS
        workloads under one uid."""
        clients = sharing_clients(workload)
        image = images.CUDA_VECTOR_ADD
        node_name = k8s.core.v1.EnvVarArgs(
            name="NODE_NAME",
            value_from=k8s.core.v1.EnvVarSourceArgs(
                field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="spec.nodeName")
            ),
        )
        container = self._container(
            "shared-gpu-client",
            image,
            workload.target,
            ["sh", "-c", SHARING_DEMO_SCRIPT],
            cpu="250m",
            memory="512Mi",
            env={"SHARING_DEMO_SECONDS": str(SHARING_DEMO_SECONDS)},
            extra_env=[node_name],
        )
        return self._job(
            workload,
            image,
            container,
            parallelism=clients,
            # MPS clients talk to the node's MPS control daemon over IPC.
            host_ipc=workload.target.sharing == "MPS",
        )

    def _container(
        self,
        name: str,
        image: str,
        target: GpuTargetSpec,
        command: list[str] | None,
        *,
        cpu: str,
        memory: str,
        env: Mapping[str, str] | None = None,
        extra_env: list[k8s.core.v1.EnvVarArgs] | None = None,
        mounts: list[k8s.core.v1.VolumeMountArgs] | None = None,
    ) -> "k8s.core.v1.ContainerArgs":
        # On GKE the device plugin mounts the driver at /usr/local/nvidia; the CUDA and PyTorch images
        # already have /usr/local/nvidia/lib64 in LD_LIBRARY_PATH. PATH is never replaced: it is where
        # the image keeps its own tools (PyTorch's python is in /opt/conda/bin).
        variables = {**SCRATCH_ENV, **(env or {})}
        if not target.gke_driver:
            # The NVIDIA container toolkit injects the driver; skip the image's CUDA-version check
            # (NVIDIA_REQUIRE_CUDA), which only guards CUDA runtime use these samples tolerate.
            variables["NVIDIA_DISABLE_REQUIRE"] = "true"
        gpus = {} if target.dra_gpus else {GPU_RESOURCE: str(target.gpus_per_pod)}
        return k8s.core.v1.ContainerArgs(
            name=name,
            image=image,
            image_pull_policy="IfNotPresent",
            command=command,
            env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in sorted(variables.items())]
            + list(extra_env or []),
            resources=k8s.core.v1.ResourceRequirementsArgs(
                # Requests equal limits: Guaranteed QoS, and the only form GPUs allow.
                limits={"cpu": cpu, "memory": memory, **gpus},
                requests={"cpu": cpu, "memory": memory, **gpus},
                # On a DRA pool the GPUs are the Pod's claim (dra/claims.py), not a limit.
                claims=[k8s.core.v1.ResourceClaimArgs(**container_claim(GPU_CLAIM))]
                if target.dra_gpus
                else None,
            ),
            security_context=restricted_container_security_context(),
            volume_mounts=[k8s.core.v1.VolumeMountArgs(name="scratch", mount_path=SCRATCH), *(mounts or [])],
        )

    def _job(
        self,
        workload: SampleWorkloadSpec,
        image: str,
        container: "k8s.core.v1.ContainerArgs",
        *,
        volumes: list[k8s.core.v1.VolumeArgs] | None = None,
        pod_annotations: Mapping[str, str] | None = None,
        parallelism: int | None = None,
        host_ipc: bool = False,
    ) -> "k8s.batch.v1.Job":
        name = object_name(workload)
        target = workload.target
        namespace = namespace_of(workload, self._args.namespace)
        node_selector = dict(target.node_selector)
        if image in AMD64_ONLY_IMAGES and target.accelerator is None:
            # An existing cluster's GPU nodes may include Arm hosts (GH200, GB200); a GKE pool's
            # architecture follows from its accelerator, and the config refuses such a sample there.
            node_selector[ARCH_LABEL] = "amd64"
        depends_on: list[pulumi.Resource] = [self.namespaces[namespace], self.network_policies[namespace]]
        if workload.kind == "pytorch-smoke" and self.script is not None:
            depends_on.append(self.script)
        claims = None
        if target.dra_gpus:
            depends_on.append(self.claim_templates[target.gpus_per_pod])
            template = gpu_claim_template_name(target.gpus_per_pod)
            claim = pod_claim(GPU_CLAIM, template)
            claims = [
                k8s.core.v1.PodResourceClaimArgs(
                    name=claim["name"], resource_claim_template_name=claim["resourceClaimTemplateName"]
                )
            ]
        return k8s.batch.v1.Job(
            f"{self._name}-{name}",
            metadata=self._meta(
                name, workload.kind, namespace=namespace, image=image, annotations=SKIP_AWAIT
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                # Indexed: each sharing-demo client knows its number (JOB_COMPLETION_INDEX).
                completion_mode="Indexed" if parallelism else None,
                parallelism=parallelism,
                completions=parallelism,
                backoff_limit=1,
                active_deadline_seconds=JOB_DEADLINE_SECONDS,
                ttl_seconds_after_finished=JOB_TTL_SECONDS,
                # A Spot preemption or node drain is not the GPU's fault: retry without counting it.
                pod_failure_policy=k8s.batch.v1.PodFailurePolicyArgs(
                    rules=[
                        k8s.batch.v1.PodFailurePolicyRuleArgs(
                            action="Ignore",
                            on_pod_conditions=[
                                k8s.batch.v1.PodFailurePolicyOnPodConditionsPatternArgs(
                                    type="DisruptionTarget", status="True"
                                )
                            ],
                        )
                    ]
                ),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        labels=app_labels(name, component=workload.kind, version=image_version(image)),
                        annotations=dict(pod_annotations) if pod_annotations else None,
                    ),
                    spec=k8s.core.v1.PodSpecArgs(
                        restart_policy="Never",
                        runtime_class_name=target.runtime_class_name,
                        automount_service_account_token=False,
                        enable_service_links=False,
                        host_ipc=True if host_ipc else None,
                        node_selector=node_selector or None,
                        affinity=require_node_labels(target.required_node_labels),
                        tolerations=[toleration_args(t) for t in target.tolerations],
                        security_context=restricted_pod_security_context(),
                        termination_grace_period_seconds=10,
                        containers=[container],
                        resource_claims=claims,
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="scratch",
                                empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="1Gi"),
                            ),
                            *(volumes or []),
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=depends_on,
                # A Job's Pod template is immutable and its name fixed: a change replaces it.
                delete_before_replace=True,
            ),
        )
