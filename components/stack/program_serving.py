"""The stack's serving layer (`gke-gpu:serving`): an InferenceService per entry, on its pool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi

from ..core import images
from ..gpu.pool import GpuPool
from ..gpu.scheduling import node_selector, tolerations
from ..serving.image_source import DEFAULT_REPOSITORY, describe_image, mirrored, registry_path
from ..serving.model import ServingConfig
from ..serving.rules import gcs_location, weights_source
from ..serving.sizing import (
    WeightsCache,
    container_size,
    describe_cache,
    describe_rollout,
    surge_services,
    weights_bytes_of,
    weights_cache,
)
from .declare import declare
from .settings import Settings

if TYPE_CHECKING:
    from ..serving.inference_service import InferenceService, InferenceServiceArgs
    from ..serving.load_test import ServingLoadTestArgs
    from ..workloads.model import WorkloadConfig


def needs_gcs_fuse(settings: Settings) -> bool:
    """A service mounts its weights from a bucket: the cluster needs the Cloud Storage FUSE driver (a
    Hyperdisk ML volume does not: the PD CSI driver and the Volume Populator are on by default)."""
    return any(
        weights_source(s.model) == "gcs" and s.weights.via == "cloudStorageFuse" for s in settings.serving
    )


def nodes_per_replica(service: ServingConfig, pool: GpuPool) -> int:
    """The nodes one replica spans: 1, or its GPUs over a node's (a whole multiple: the rules say so)."""
    per_node = pool.gpus_per_node or service.gpus_per_replica
    return max(1, service.gpus_per_replica // per_node)


def needs_gateway_api(settings: Settings) -> bool:
    """A service has an Inference Gateway: the cluster needs GKE's Gateway API."""
    return any(s.gateway for s in settings.serving)


def serving(
    settings: Settings,
    cluster_name: str,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    *,
    network: list[pulumi.Resource] | None = None,
    node_service_account: pulumi.Input[str] | None = None,
    image_reader: pulumi.Input[str] | None = None,
) -> dict[str, Any]:
    """Declare each service (and its gateway; `network`: what a gateway waits for, the VPC the stack
    creates); return, per service, where it answers and how to try it (stack output `serving`).
    `node_service_account`: a Standard cluster's nodes' account, for the nodes GKE creates for
    Hyperdisk ML transfers. `image_reader`: the account every node pulls images as, which reads the
    serving images' mirror."""
    if not settings.serving:
        return {}
    # Imported here: a stack without model servers does not pay for their modules.
    from ..serving.inference_service import InferenceService
    from ..serving.lws_controller import LeaderWorkerSetController
    from ..serving.metrics_adapter import CustomMetricsAdapter

    autopilot = settings.cluster.mode == "autopilot"
    pools = {p.name: p for p in settings.gpu_pools}
    outputs: dict[str, Any] = {}
    registry = _image_mirror(settings, image_reader)
    vllm_image = mirrored(registry, images.VLLM) if registry else images.VLLM
    if any(s.replicas.max > s.replicas.min for s in settings.serving):
        # One per cluster: the autoscalers read vLLM's queue through it.
        adapter = declare(
            CustomMetricsAdapter,
            "custom-metrics",
            {"project": settings.project or "", "cluster_name": cluster_name},
            opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
        )
        depends_on = [*depends_on, adapter]
    if any(s.weights.via == "hyperdiskMl" for s in settings.serving):
        depends_on = [*depends_on, _transfer_class(provider, node_service_account)]
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
    surging = {
        name
        for pool in pools.values()
        for name in surge_services(
            pool,
            ((s.name, s.replicas.max, s.gpus_per_replica) for s in settings.serving if s.pool == pool.name),
        )
    }
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
            "image": vllm_image,
        }
        size = container_size(pool, service.gpus_per_replica // nodes)
        args["cpu"], args["memory_gib"], args["shm_gib"] = size["cpu"], size["memory_gib"], size["shm_gib"]
        args["disk_gib"] = size["disk_gib"]
        # A Pod's file cache: one node's share of a replica that spans nodes.
        cache = weights_cache(pool, service.gpus_per_replica // nodes, weights_bytes_of(service))
        if service.weights.via == "hyperdiskMl":
            args["weights"] = service.weights.model_dump(exclude_none=True)  # type: ignore[typeddict-item]
            args["zones"] = list(pool.zones or ())
        elif weights_source(service.model) == "gcs" and cache.size_gib:
            args["weights_cache_gib"], args["weights_cache_medium"] = cache.size_gib, cache.medium
        if service.name in surging:
            args["surge"] = True
        if service.replicas.max > service.replicas.min:
            args["max_replicas"] = service.replicas.max
            if service.scale_on is not None:
                args["scale_on"] = service.scale_on
        if service.hf_token_secret is not None:
            args["hf_token_secret"] = service.hf_token_secret
        if service.max_model_len is not None:
            args["max_model_len"] = service.max_model_len
        if service.gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = service.gpu_memory_utilization
        if service.model_info is not None:
            args["model_info"] = service.model_info.model_dump(exclude_none=True)  # type: ignore[typeddict-item]
        if nodes > 1:
            args["gpus_per_node"] = service.gpus_per_replica // nodes
        if pool.dra_gpus:
            # GKE's device plugin is off there: the Pods claim their GPUs (stack/program_dra.py).
            args["dra_gpus"] = True
        component = declare(
            InferenceService,
            f"serve-{service.name}",
            args,
            opts=pulumi.ResourceOptions(
                providers={"kubernetes": provider}, depends_on=[*depends_on, *(lws if nodes > 1 else [])]
            ),
        )
        outputs[service.name] = _summary(service, pool, component, nodes, cache, service.name in surging)
        if service.gateway:
            from .program_gateway import gateway

            outputs[service.name]["gateway"] = gateway(
                settings, service, provider, [component, *(network or [])]
            )
        load = next(
            (w for w in settings.workloads if w.name == "serving-load" and w.service == service.name), None
        )
        if load is not None:
            outputs[service.name]["loadTest"] = _load_test(load, service, pool, provider, component, registry)
        outputs[service.name]["image"] = describe_image(vllm_image, registry, pool.image_cache)
    return outputs


def _image_mirror(settings: Settings, image_reader: pulumi.Input[str] | None) -> str:
    """The serving images' mirror in the stack's region (a Docker Hub remote repository the nodes
    read), its registry path; `` where no node account is given (a program that reads images from
    Docker Hub itself)."""
    if image_reader is None or not settings.region:
        return ""
    from ..serving.image_mirror import ImageMirror

    declare(
        ImageMirror,
        "serving-images",
        {
            "project": settings.project or "",
            "region": settings.region,
            "node_service_account_email": image_reader,
        },
    )
    return registry_path(settings.region, settings.project or "", DEFAULT_REPOSITORY)


def _transfer_class(
    provider: pulumi.ProviderResource, node_service_account: pulumi.Input[str] | None
) -> pulumi.Resource:
    """The cluster's one ComputeClass for the Volume Populator's transfer Jobs."""
    from ..serving.transfer_class import HyperdiskMlTransferClass, HyperdiskMlTransferClassArgs

    args: HyperdiskMlTransferClassArgs = {}
    if node_service_account is not None:
        args["node_service_account_email"] = node_service_account
    return declare(
        HyperdiskMlTransferClass,
        "weights-transfer",
        args,
        opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
    )


def load_test_args(load: WorkloadConfig, service: ServingConfig, pool: GpuPool) -> ServingLoadTestArgs:
    """The load test's args: the stack file's floors, each unset one the estimate for the pool's GPU."""
    from ..serving.load_floors import default_floors

    estimate = default_floors(pool.accelerator, pool.mig_partition_size)
    given = load.floors
    gpu = pool.accelerator + (f" {pool.mig_partition_size}" if pool.mig_partition_size else "")
    return {
        "service": service.name,
        "min_output_tok_s": (given and given.output_tokens_per_second) or estimate.min_output_tok_s,
        "max_p99_ttft_ms": (given and given.ttft_p99_ms) or estimate.max_p99_ttft_ms,
        "max_mean_tpot_ms": (given and given.tpot_mean_ms) or estimate.max_mean_tpot_ms,
        "label": f"{service.name} on {gpu}",
    }


def _load_test(
    load: WorkloadConfig,
    service: ServingConfig,
    pool: GpuPool,
    provider: pulumi.ProviderResource,
    component: InferenceService,
    registry: str,
) -> dict[str, Any]:
    from ..serving.load_test import ServingLoadTest

    args = load_test_args(load, service, pool)
    if registry:
        args["image"] = mirrored(registry, images.PYTHON)
    given = load.floors.model_fields_set if load.floors else set()
    test = declare(
        ServingLoadTest,
        f"serving-load-{service.name}",
        args,
        # After the server: the test's own wait then starts when the Deployment exists.
        opts=pulumi.ResourceOptions(providers={"kubernetes": provider}, depends_on=[component]),
    )
    namespace = service.namespace
    floors = {
        "outputTokensPerSecond": (args["min_output_tok_s"], "output_tokens_per_second"),
        "ttftP99Ms": (args["max_p99_ttft_ms"], "ttft_p99_ms"),
        "tpotMeanMs": (args["max_mean_tpot_ms"], "tpot_mean_ms"),
    }
    summary: dict[str, Any] = {
        "job": test.job_name,
        "levels": "concurrency 1, 4, 16; the last is judged",
        "floors": {
            key: f"{value:g} ({'stack file' if field in given else 'estimate for ' + pool.accelerator})"
            for key, (value, field) in floors.items()
        },
        "commands": {
            "follow": f"kubectl logs -n {namespace} job/serving-load -f",
            "result": f"kubectl logs -n {namespace} job/serving-load | grep 'SERVING-LOAD RESULT'",
        },
    }
    if service.gpus_per_replica > 1 and len(given) < len(floors):
        summary["note"] = (
            f"the estimates are for a model of up to 8B parameters on one GPU; {service.name} has "
            f"{service.gpus_per_replica} GPUs a replica, so set floors measured for its model "
            "(workloads[].floors)"
        )
    return summary


def _summary(
    service: ServingConfig,
    pool: GpuPool,
    component: InferenceService,
    nodes: int,
    cache: WeightsCache,
    surge: bool,
) -> dict[str, Any]:
    """`cache`: the service's file cache; `surge`: whether a rollout surges a replica."""
    namespace = service.namespace
    volume: dict[str, Any] | None = None
    if service.weights.via == "hyperdiskMl":
        weights, volume = _hyperdisk_ml_summary(service, pool)
    elif weights_source(service.model) == "gcs":
        bucket, path = gcs_location(service.model)
        weights = (
            f"Cloud Storage FUSE: gs://{bucket}/{path}, read-only, as the service's own account, its "
            f"sidecar unlimited; {describe_cache(cache)}"
        )
        if cache.size_gib:
            weights += "; parallel downloads"
    else:
        token = service.hf_token_secret or "none, a public model"
        weights = f"downloaded from Hugging Face at start ({service.model}, token: {token})"
    summary: dict[str, Any] = {
        "pool": pool.name,
        "url": component.service_url,
        "namespace": namespace,
        "model": service.model,
        "weights": weights,
        "rollout": describe_rollout(pool, service.gpus_per_replica, service.replicas.min, surge),
        "gpusPerReplica": service.gpus_per_replica,
        "replicas": service.replicas.max
        if service.replicas.max == service.replicas.min
        else {"min": service.replicas.min, "max": service.replicas.max},
        "scaling": "fixed"
        if service.replicas.max == service.replicas.min
        else (
            "GPU duty cycle (kubernetes.io/container/accelerator/duty_cycle), 80% a GPU (HPA through the "
            "custom metrics adapter)"
            if service.scale_on == "gpu"
            else "vllm:num_requests_waiting, 5 per replica (HPA through the custom metrics adapter)"
        ),
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
    if volume is not None:
        summary["hyperdiskMl"] = volume
        summary["commands"]["wait"] = summary["commands"]["wait"].replace("--timeout=45m", "--timeout=90m")
        summary["commands"]["transfer"] = f"kubectl describe pvc -n {namespace} {volume['claim']}"
    return summary


def _hyperdisk_ml_summary(service: ServingConfig, pool: GpuPool) -> tuple[str, dict[str, Any]]:
    """The weights line of a service on Hyperdisk ML (which path and why), and the volume's figures."""
    from ..serving.hyperdisk_ml import throughput, volume_key

    bucket, path = gcs_location(service.model)
    weights, zones = service.weights, sorted(pool.zones or ())
    assert weights.size_gib is not None, "the rules require a size with via hyperdiskMl"
    where = f"one disk in each of {len(zones)} zones ({', '.join(zones)})"
    if len(zones) == 1:
        where = f"in {zones[0]}"
    line = (
        f"Hyperdisk ML {weights.size_gib} GiB at {throughput(weights)} MiB/s, {where} (weights.via "
        f"hyperdiskMl): filled once from gs://{bucket}/{path}/ by the GKE Volume Populator before the first "
        "replica starts, then mounted read-only by every replica at once (no Cloud Storage FUSE sidecar, "
        "no replica reading the bucket)"
    )
    volume = {
        "sizeGib": weights.size_gib,
        "throughputMiBps": throughput(weights),
        "zones": zones,
        "disks": len(zones),
        "claim": f"weights-{volume_key(service.model, weights, zones)}",
    }
    return line, volume
