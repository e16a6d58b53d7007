"""The model server's Pod, for the Deployment and the LeaderWorkerSet (leader_worker_set.py derives its
workers' from it) and for a disaggregated service's roles (disaggregated.py derives theirs from it): its
security context, weights volume, home and shm emptyDirs, resources, probes, node selector and
tolerations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi_kubernetes as k8s

from ..core import images
from ..core.k8s import restricted_container_security_context, toleration_args
from .rules import weights_source
from .server_parts import (
    CONTAINER,
    HOME,
    PORT,
    VLLM_GROUP,
    VLLM_USER,
    WEIGHTS_DIR,
    gpu_claims,
    gpu_resources,
    vllm_args,
    weights_volumes,
)

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec

KSA = "vllm"
# vLLM answers only once the model is loaded (docs/serving-research.md 1c): the startup probe gives
# the weights and the engine 30 minutes, the readiness probe takes the replica out of the Service the
# moment /health fails (503: the engine died), and liveness restarts it after 3 minutes of that.
STARTUP_PERIOD_S, STARTUP_FAILURES = 10, 180
PROBE_TIMEOUT_S = 5


def server_pod_spec(spec: InferenceServiceSpec) -> k8s.core.v1.PodSpecArgs:
    """The server's Pod: one vLLM container on the replica's GPUs, its weights, caches and probes, and
    the hardened security context (docs/serving.md, "What gets created")."""
    source = weights_source(spec.model)
    # The whole home directory is writable scratch (vLLM's, Triton's, CUDA's and Hugging Face's
    # caches live under it), counted against the container's ephemeral-storage limit.
    mounts = [
        k8s.core.v1.VolumeMountArgs(name="home", mount_path=HOME),
        k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
        k8s.core.v1.VolumeMountArgs(name="dshm", mount_path="/dev/shm"),
    ]
    volumes = [
        k8s.core.v1.VolumeArgs(
            name="home", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=f"{spec.disk_gib}Gi")
        ),
        k8s.core.v1.VolumeArgs(name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="1Gi")),
        k8s.core.v1.VolumeArgs(
            name="dshm",
            empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=f"{spec.shm_gib}Gi"),
        ),
    ]
    env = [
        k8s.core.v1.EnvVarArgs(name="HOME", value=HOME),
        # No usage statistics sent to vLLM's project.
        k8s.core.v1.EnvVarArgs(name="VLLM_NO_USAGE_STATS", value="1"),
        k8s.core.v1.EnvVarArgs(name="DO_NOT_TRACK", value="1"),
    ]
    if source == "gcs":
        mounts.append(k8s.core.v1.VolumeMountArgs(name="weights", mount_path=WEIGHTS_DIR, read_only=True))
        volumes += weights_volumes(spec, "weights")
    elif spec.hf_token_secret is not None:  # a public model is downloaded without a token
        env.append(
            k8s.core.v1.EnvVarArgs(
                name="HF_TOKEN",
                value_from=k8s.core.v1.EnvVarSourceArgs(
                    secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=spec.hf_token_secret, key="token")
                ),
            )
        )
    probe = k8s.core.v1.HTTPGetActionArgs(path="/health", port=PORT)
    resources = {
        "cpu": f"{spec.cpu:g}",
        "memory": f"{spec.memory_gib}Gi",
        # The home emptyDir and /tmp: the kubelet evicts a Pod whose emptyDirs outgrow this.
        "ephemeral-storage": f"{spec.disk_gib + 1}Gi",
        **gpu_resources(spec),
    }
    pod_claims, container_claims = gpu_claims(spec)
    return k8s.core.v1.PodSpecArgs(
        service_account_name=KSA,
        node_selector=dict(spec.node_selector),
        tolerations=[toleration_args(t) for t in spec.tolerations],
        security_context=k8s.core.v1.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=VLLM_USER,
            run_as_group=VLLM_GROUP,
            fs_group=VLLM_GROUP,
            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        termination_grace_period_seconds=60,
        # No Kubernetes API for vLLM. The Cloud Storage FUSE driver gets the Pod's Workload Identity
        # token from the kubelet's CSI request, not from the Pod (gcs-fuse-csi-driver
        # pkg/cloud_provider/auth/token_sources.go).
        automount_service_account_token=False,
        resource_claims=pod_claims,
        containers=[
            k8s.core.v1.ContainerArgs(
                name=CONTAINER,
                image=spec.image or images.VLLM,
                args=vllm_args(spec),
                env=env,
                ports=[k8s.core.v1.ContainerPortArgs(name="http", container_port=PORT)],
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    limits=resources, requests=resources, claims=container_claims
                ),
                startup_probe=k8s.core.v1.ProbeArgs(
                    http_get=probe,
                    period_seconds=STARTUP_PERIOD_S,
                    failure_threshold=STARTUP_FAILURES,
                    timeout_seconds=PROBE_TIMEOUT_S,
                ),
                readiness_probe=k8s.core.v1.ProbeArgs(
                    http_get=probe,
                    period_seconds=10,
                    failure_threshold=3,
                    timeout_seconds=PROBE_TIMEOUT_S,
                ),
                liveness_probe=k8s.core.v1.ProbeArgs(
                    http_get=probe,
                    period_seconds=30,
                    failure_threshold=6,
                    timeout_seconds=PROBE_TIMEOUT_S,
                ),
                security_context=restricted_container_security_context(),
                volume_mounts=mounts,
            )
        ],
        volumes=volumes,
    )
