"""Sample GPU workloads that prove a pool works: nvidia-smi, CUDA vectorAdd, a PyTorch smoke test,
and a Deployment whose replicas share one GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import images
from components.gpu_scheduling import GPU_RESOURCE
from components.k8s_common import (
    GKE_DRIVER_MOUNT,
    app_labels,
    image_version,
    require_node_labels,
    restricted_container_security_context,
    restricted_pod_security_context,
    selector_labels,
)

PYTORCH_SCRIPT = Path(__file__).parent / "scripts" / "pytorch_smoke.py"
JOB_TTL_SECONDS = 24 * 3600  # long enough to read the log the morning after
# Scale-up from zero (or a Spot retry) can take well over ten minutes for large GPUs.
JOB_DEADLINE_SECONDS = 3600
# `pulumi up` does not wait for the samples: GPU capacity (Spot, scale-from-zero) must not make
# a deploy fail. Their results are read with the commands in the stack output `sampleWorkloads`.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
# nvidia-smi comes with the driver, not the image: GKE mounts it in /usr/local/nvidia/bin, the NVIDIA
# container toolkit in /usr/bin. Appending keeps the image's own PATH first.
NVIDIA_SMI_PATH = f'PATH="$PATH:{GKE_DRIVER_MOUNT}/bin"; '


@dataclass(frozen=True, kw_only=True)
class GpuTarget:
    """Where a sample Pod runs and how it asks for its GPU."""

    # The GPU pool or profile name (or a short label for an existing cluster's GPU nodes).
    name: str
    accelerator: str | None
    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]
    gpus_per_pod: int
    # "TIME_SHARING", "MPS" (GKE) or "TIME_SLICING" (NVIDIA device plugin), None when not shared.
    sharing: str | None = None
    shared_clients: int | None = None
    # Node label keys that must exist (an existing GKE cluster: any GPU node).
    required_node_labels: Sequence[str] = ()
    # True on GKE: the driver and nvidia-smi are mounted at /usr/local/nvidia.
    gke_driver: bool = True
    # Generic clusters whose NVIDIA runtime is a RuntimeClass rather than containerd's default.
    runtime_class_name: str | None = None


@dataclass(frozen=True, kw_only=True)
class SampleWorkload:
    kind: str  # nvidia-smi | cuda-vector-add | pytorch-smoke | sharing-demo
    target: GpuTarget
    replicas: int | None = None


@dataclass(frozen=True, kw_only=True)
class SampleWorkloadsArgs:
    workloads: Sequence[SampleWorkload]
    namespace: str = "gpu-samples"
    extra_labels: Mapping[str, str] = field(default_factory=dict)


def namespace_of(workload: SampleWorkload, base: str) -> str:
    """The namespace a sample runs in: an MPS client needs hostIPC, which only the 'privileged' Pod
    Security level allows, so it gets a namespace of its own and the others stay 'restricted'."""
    if workload.kind == "sharing-demo" and workload.target.sharing == "MPS":
        return f"{base}-mps"
    return base


class SampleWorkloads(pulumi.ComponentResource):
    """The sample Jobs and Deployment, each pinned to its GPU pool, in a 'restricted' namespace.

    Every Pod: `nvidia.com/gpu` limits (integers, requests equal), the GPU taint's toleration, the
    pool's node selectors (accelerator, Spot, sharing, MIG partition), the 'restricted' Pod
    Security settings (non-root, no privilege escalation, no capabilities, RuntimeDefault seccomp)
    with a read-only root filesystem, CPU and memory requests equal to limits, and a pinned image.
    Jobs retry once (Spot preemptions do not count, through a Pod failure policy), give up after an
    hour and are deleted a day after they finish. The MPS sharing demo alone runs in
    `<namespace>-mps`, which allows the hostIPC its MPS clients need.
    """

    namespaces: dict[str, k8s.core.v1.Namespace]
    objects: dict[str, pulumi.CustomResource]

    def __init__(
        self, name: str, args: SampleWorkloadsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gke-gpu:workloads:SampleWorkloads", name, None, opts)
        self._name = name
        self._args = args
        self.namespaces = {}
        for namespace in sorted({namespace_of(w, args.namespace) for w in args.workloads} | {args.namespace}):
            enforce = "restricted" if namespace == args.namespace else "privileged"
            self.namespaces[namespace] = k8s.core.v1.Namespace(
                f"{name}-namespace" if namespace == args.namespace else f"{name}-namespace-mps",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=namespace,
                    labels={
                        **app_labels(namespace, component="gpu-samples"),
                        "pod-security.kubernetes.io/enforce": enforce,
                        "pod-security.kubernetes.io/warn": "restricted",
                        "pod-security.kubernetes.io/audit": "restricted",
                    },
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.script: k8s.core.v1.ConfigMap | None = None
        self.objects = {}
        if any(w.kind == "pytorch-smoke" for w in args.workloads):
            self.script = k8s.core.v1.ConfigMap(
                f"{name}-pytorch-script",
                metadata=self._meta("pytorch-smoke-script", "pytorch-smoke", namespace=args.namespace),
                data={"smoke.py": PYTORCH_SCRIPT.read_text(encoding="utf-8")},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[args.namespace]]),
            )
        for workload in args.workloads:
            object_name = f"{workload.kind}-{workload.target.name}"
            self.objects[object_name] = self._declare(workload, object_name)
        self.register_outputs({"namespace": args.namespace, "objects": sorted(self.objects)})

    # -- builders ---------------------------------------------------------------------------------

    def _meta(
        self,
        object_name: str,
        kind: str,
        *,
        namespace: str,
        image: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> k8s.meta.v1.ObjectMetaArgs:
        labels = {**app_labels(object_name, component=kind, version=image_version(image) if image else None)}
        labels.update(self._args.extra_labels)
        return k8s.meta.v1.ObjectMetaArgs(
            name=object_name,
            namespace=namespace,
            labels=labels,
            annotations=dict(annotations) if annotations else None,
        )

    def _declare(self, workload: SampleWorkload, object_name: str) -> pulumi.CustomResource:
        target = workload.target
        if workload.kind == "nvidia-smi":
            image = images.CUDA_BASE
            container = self._container(
                "nvidia-smi",
                image,
                target,
                command=["sh", "-c", NVIDIA_SMI_PATH + "nvidia-smi && nvidia-smi -L"],
                cpu="100m",
                memory="256Mi",
            )
            return self._job(object_name, workload, image, [container])
        if workload.kind == "cuda-vector-add":
            image = images.CUDA_VECTOR_ADD
            container = self._container("vector-add", image, target, command=None, cpu="250m", memory="512Mi")
            return self._job(object_name, workload, image, [container])
        if workload.kind == "pytorch-smoke":
            image = images.pytorch_image(target.accelerator)
            container = self._container(
                "pytorch",
                image,
                target,
                command=["python", "/opt/smoke/smoke.py"],
                cpu="2",
                memory="8Gi",
                env={"HOME": "/tmp", "TORCH_HOME": "/tmp/torch", "PYTHONUNBUFFERED": "1"},
                mounts=[
                    k8s.core.v1.VolumeMountArgs(name="script", mount_path="/opt/smoke", read_only=True),
                ],
            )
            volumes = [
                k8s.core.v1.VolumeArgs(
                    name="script",
                    config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name="pytorch-smoke-script"),
                )
            ]
            return self._job(object_name, workload, image, [container], volumes=volumes)
        if workload.kind == "sharing-demo":
            return self._sharing_demo(object_name, workload)
        raise ValueError(f"unknown sample workload {workload.kind!r}")

    def _container(
        self,
        name: str,
        image: str,
        target: GpuTarget,
        *,
        command: list[str] | None,
        cpu: str,
        memory: str,
        env: Mapping[str, str] | None = None,
        mounts: list[k8s.core.v1.VolumeMountArgs] | None = None,
    ) -> k8s.core.v1.ContainerArgs:
        # On GKE the device plugin mounts the driver at /usr/local/nvidia; the CUDA and PyTorch images
        # already have /usr/local/nvidia/lib64 in LD_LIBRARY_PATH. PATH is never replaced: it is where
        # the image keeps its own tools (PyTorch's python is in /opt/conda/bin).
        variables = dict(env or {})
        if not target.gke_driver:
            # The NVIDIA container toolkit injects the driver; skip the image's CUDA-version check
            # (NVIDIA_REQUIRE_CUDA), which only guards CUDA runtime use these samples tolerate.
            variables["NVIDIA_DISABLE_REQUIRE"] = "true"
        return k8s.core.v1.ContainerArgs(
            name=name,
            image=image,
            image_pull_policy="IfNotPresent",
            command=command,
            env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in sorted(variables.items())] or None,
            resources=k8s.core.v1.ResourceRequirementsArgs(
                # Requests equal limits: Guaranteed QoS, and the only form GPUs allow.
                limits={"cpu": cpu, "memory": memory, GPU_RESOURCE: str(target.gpus_per_pod)},
                requests={"cpu": cpu, "memory": memory, GPU_RESOURCE: str(target.gpus_per_pod)},
            ),
            security_context=restricted_container_security_context(),
            volume_mounts=[
                k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
                *(mounts or []),
            ],
        )

    def _pod_spec(
        self,
        target: GpuTarget,
        containers: list[k8s.core.v1.ContainerArgs],
        *,
        restart_policy: str,
        volumes: list[k8s.core.v1.VolumeArgs] | None = None,
        host_ipc: bool = False,
    ) -> k8s.core.v1.PodSpecArgs:
        affinity = require_node_labels(target.required_node_labels)
        return k8s.core.v1.PodSpecArgs(
            restart_policy=restart_policy,
            runtime_class_name=target.runtime_class_name,
            automount_service_account_token=False,
            enable_service_links=False,
            host_ipc=True if host_ipc else None,
            node_selector=dict(target.node_selector) or None,
            affinity=affinity,
            tolerations=[k8s.core.v1.TolerationArgs(**_snake(t)) for t in target.tolerations],
            security_context=restricted_pod_security_context(),
            termination_grace_period_seconds=10,
            containers=containers,
            volumes=[
                k8s.core.v1.VolumeArgs(
                    name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="1Gi")
                ),
                *(volumes or []),
            ],
        )

    def _job(
        self,
        object_name: str,
        workload: SampleWorkload,
        image: str,
        containers: list[k8s.core.v1.ContainerArgs],
        *,
        volumes: list[k8s.core.v1.VolumeArgs] | None = None,
    ) -> k8s.batch.v1.Job:
        namespace = namespace_of(workload, self._args.namespace)
        meta = self._meta(
            object_name, workload.kind, namespace=namespace, image=image, annotations=SKIP_AWAIT
        )
        pod_labels = app_labels(object_name, component=workload.kind, version=image_version(image))
        return k8s.batch.v1.Job(
            f"{self._name}-{object_name}",
            metadata=meta,
            spec=k8s.batch.v1.JobSpecArgs(
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
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=pod_labels),
                    spec=self._pod_spec(workload.target, containers, restart_policy="Never", volumes=volumes),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.namespaces[namespace]] + ([self.script] if self.script else []),
                # A Job's Pod template is immutable and its name fixed: a change replaces it.
                delete_before_replace=True,
            ),
        )

    def _sharing_demo(self, object_name: str, workload: SampleWorkload) -> k8s.apps.v1.Deployment:
        """Replicas that share one GPU. MPS clients run as uid 1000 like every sample: NVIDIA MPS
        serves one Linux user per GPU at a time, so clients of other users wait (not verified on
        GKE's MPS daemon); run your MPS workloads under one uid."""
        namespace = namespace_of(workload, self._args.namespace)
        target = workload.target
        clients = target.shared_clients or 2
        replicas = workload.replicas or min(clients, 4)
        image = images.CUDA_BASE
        # Each replica holds one shared nvidia.com/gpu and reports what it sees every 30 seconds;
        # `kubectl get pods -o wide` shows several replicas on one node and one physical GPU.
        script = (
            NVIDIA_SMI_PATH + "nvidia-smi -L; "
            "while true; do "
            "nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used --format=csv,noheader; "
            "sleep 30; done"
        )
        container = self._container(
            "shared-gpu-client", image, target, command=["sh", "-c", script], cpu="100m", memory="128Mi"
        )
        labels = app_labels(object_name, component="sharing-demo", version=image_version(image))
        return k8s.apps.v1.Deployment(
            f"{self._name}-{object_name}",
            metadata=self._meta(
                object_name, "sharing-demo", namespace=namespace, image=image, annotations=SKIP_AWAIT
            ),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=replicas,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=self._pod_spec(
                        target,
                        [container],
                        restart_policy="Always",
                        # MPS clients talk to the node's MPS control daemon over IPC.
                        host_ipc=target.sharing == "MPS",
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[namespace]]),
        )


def _snake(toleration: Mapping[str, Any]) -> dict[str, Any]:
    names = {"tolerationSeconds": "toleration_seconds"}
    return {names.get(k, k): v for k, v in toleration.items()}
