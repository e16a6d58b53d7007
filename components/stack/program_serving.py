"""The stack's serving layer (`gke-gpu:serving`): an InferenceService per entry, on its pool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi

from ..core.catalog import load_catalog
from ..gpu.pool import GpuPool
from ..gpu.scheduling import node_selector, tolerations
from ..serving.model import ServingConfig
from ..serving.rules import gcs_location, weights_source
from .declare import declare
from .settings import Settings

if TYPE_CHECKING:
    from ..serving.inference_service import InferenceService, InferenceServiceArgs


def needs_gcs_fuse(settings: Settings) -> bool:
    """A service reads its weights from a bucket: the cluster needs the Cloud Storage FUSE driver."""
    return any(weights_source(s.model) == "gcs" for s in settings.serving)


def nodes_per_replica(service: ServingConfig, pool: GpuPool) -> int:
    """The nodes one replica spans: 1, or its GPUs over a node's (a whole multiple: the rules say so)."""
    per_node = pool.gpus_per_node or service.gpus_per_replica
    return max(1, service.gpus_per_replica // per_node)


def container_size(pool: GpuPool, gpus: int) -> dict[str, int]:
    """CPU, memory, /dev/shm and disk of a replica taking `gpus` of a node: half the node's CPU and 60%
    of its memory in the GPUs' proportion, what a GPU node's allocatable leaves after GKE's reservations
    and the node's DaemonSets (at least 1 core and 4 GiB); shm a quarter of the memory, at most 16;
    disk a quarter of the boot disk (the image and the node need the rest). Without a machine type
    (an Autopilot profile's default), 4 cores and 24 GiB, which Autopilot raises to its minimums."""
    accelerator = load_catalog().accelerator(pool.accelerator)
    machine = accelerator.machine_type(pool.machine_type or "") if accelerator else None
    disk = max(20, pool.disk_size_gb // 4)
    if machine is None or not pool.gpus_per_node:
        return {"cpu": 4, "memory_gib": 24, "shm_gib": 4, "disk_gib": disk}
    share = gpus / pool.gpus_per_node
    cpu = max(1, int(machine.vcpus * share * 0.5))
    memory = max(4, int(machine.memory_gb * share * 0.6))
    return {"cpu": cpu, "memory_gib": memory, "shm_gib": max(1, min(16, memory // 4)), "disk_gib": disk}


def serving(
    settings: Settings,
    cluster_name: str,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
) -> dict[str, Any]:
    """Declare each service; return, per service, where it answers and how to try it (stack output
    `serving`)."""
    if not settings.serving:
        return {}
    # Imported here: a stack without model servers does not pay for their modules.
    from ..serving.inference_service import InferenceService
    from ..serving.lws_controller import LeaderWorkerSetController
    from ..serving.metrics_adapter import CustomMetricsAdapter

    autopilot = settings.cluster.mode == "autopilot"
    pools = {p.name: p for p in settings.gpu_pools}
    outputs: dict[str, Any] = {}
    if any(s.replicas.max > s.replicas.min for s in settings.serving):
        # One per cluster: the autoscalers read vLLM's queue through it.
        adapter = declare(
            CustomMetricsAdapter,
            "custom-metrics",
            {"project": settings.project or "", "cluster_name": cluster_name},
            opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
        )
        depends_on = [*depends_on, adapter]
    lws: list[pulumi.Resource] = []
    if any(nodes_per_replica(s, pools[s.pool]) > 1 for s in settings.serving):
        # One per cluster: a replica that spans nodes is a LeaderWorkerSet, which its webhooks admit.
        lws = [
            declare(
                LeaderWorkerSetController,
                "leader-worker-set",
                {},
                opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
            )
        ]
    for service in settings.serving:
        pool = pools[service.pool]
        nodes = nodes_per_replica(service, pool)
        args: InferenceServiceArgs = {
            "name": service.name,
            "model": service.model,
            "server": service.server,
            "gpus_per_replica": service.gpus_per_replica,
            "replicas": service.replicas.min,
            "node_selector": node_selector(pool, autopilot=autopilot),
            "tolerations": tolerations(pool, autopilot=autopilot),  # type: ignore[typeddict-item]
            "project": settings.project or "",
            "cluster_name": cluster_name,
            "client_namespaces": list(service.client_namespaces),
        }
        size = container_size(pool, service.gpus_per_replica // nodes)
        args["cpu"], args["memory_gib"], args["shm_gib"] = size["cpu"], size["memory_gib"], size["shm_gib"]
        args["disk_gib"] = size["disk_gib"]
        if service.replicas.max > service.replicas.min:
            args["max_replicas"] = service.replicas.max
        if service.hf_token_secret is not None:
            args["hf_token_secret"] = service.hf_token_secret
        if service.max_model_len is not None:
            args["max_model_len"] = service.max_model_len
        if nodes > 1:
            args["gpus_per_node"] = service.gpus_per_replica // nodes
        component = declare(
            InferenceService,
            f"serve-{service.name}",
            args,
            opts=pulumi.ResourceOptions(
                providers={"kubernetes": provider}, depends_on=[*depends_on, *(lws if nodes > 1 else [])]
            ),
        )
        outputs[service.name] = _summary(service, pool, component, nodes)
    return outputs


def _summary(
    service: ServingConfig, pool: GpuPool, component: InferenceService, nodes: int
) -> dict[str, Any]:
    namespace = service.namespace
    if weights_source(service.model) == "gcs":
        bucket, path = gcs_location(service.model)
        weights = f"Cloud Storage FUSE: gs://{bucket}/{path}, read-only, as the service's own account"
    else:
        weights = f"downloaded from Hugging Face at start ({service.model}, token: {service.hf_token_secret})"
    summary: dict[str, Any] = {
        "pool": pool.name,
        "url": component.service_url,
        "namespace": namespace,
        "model": service.model,
        "weights": weights,
        "gpusPerReplica": service.gpus_per_replica,
        "replicas": service.replicas.max
        if service.replicas.max == service.replicas.min
        else {"min": service.replicas.min, "max": service.replicas.max},
        "scaling": "fixed"
        if service.replicas.max == service.replicas.min
        else "vllm:num_requests_waiting, 5 per replica (HPA through the custom metrics adapter)",
        "commands": {
            "wait": f"kubectl rollout status -n {namespace} deployment/{service.name} --timeout=45m",
            "portForward": f"kubectl port-forward -n {namespace} service/{service.name} 8000:8000",
            "ask": "curl -s localhost:8000/v1/completions -H 'Content-Type: application/json' -d "
            f'\'{{"model": "{service.name}", "prompt": "The capital of France is", "max_tokens": 16}}\'',
            "logs": f"kubectl logs -n {namespace} deployment/{service.name} -c vllm",
        },
    }
    if nodes > 1:
        from ..serving.leader_worker_set import group_name

        group = group_name(service.name)
        per_node = service.gpus_per_replica // nodes
        summary["nodesPerReplica"] = nodes
        summary["layout"] = (
            f"LeaderWorkerSet {group}: replica i is {nodes} Pods on {nodes} nodes, the leader {group}-i "
            f"(the API) and {nodes - 1} headless worker(s) {group}-i-n; tensor parallel {per_node} within "
            f"each node, pipeline parallel {nodes} across them"
        )
        summary["commands"] = {
            **summary["commands"],
            "wait": f"kubectl wait -n {namespace} leaderworkerset/{group} --for=condition=Available "
            "--timeout=45m",
            "logs": f"kubectl logs -n {namespace} {group}-0 -c vllm",
            "workerLogs": f"kubectl logs -n {namespace} {group}-0-1 -c vllm",
        }
    return summary
