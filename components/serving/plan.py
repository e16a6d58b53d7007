"""The serving domain's plan of one stack-file service on its pool: the InferenceService's args, the Pod's
size and file cache, whether a rollout surges, and the stack output that says where it answers and how to
try it (commands built from the components' own constants, never retyped). Pure: the stack layer
declares what this plans (stack/program_serving.py) and only loops and wires.

Imported by stacks that have model servers only (their components' modules come with it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from ..gpu.pool import GpuPool
from ..gpu.scheduling import node_selector, tolerations
from .gateway import EPP_CHART, EPP_VERSION, GATEWAY_CLASS, InferenceGatewayArgs, epp_name
from .gpu_nics import GpuNicsArgs
from .hyperdisk_ml import TRANSFER_TIMEOUT_S, throughput, volume_key
from .inference_service import ROLLOUT_TIMEOUT_S, InferenceServiceArgs
from .leader_worker_set import group_name
from .load_floors import (
    PD_GUIDE,
    PD_GUIDE_FLOORS,
    PD_GUIDE_INPUT_TOKENS,
    PD_GUIDE_LEVELS,
    PD_GUIDE_OUTPUT_TOKENS,
    PD_GUIDE_PROMPT_WORDS,
    REFERENCE_LEVELS,
    default_floors,
)
from .load_test import JOB, ServingLoadTestArgs
from .model import ModelServerSettings, ServingConfig
from .pd_plan import disaggregated_args, disaggregated_summary
from .pd_pool_rules import pool_gpu_nics, uses_pool_nics
from .pool_rules import nodes_per_replica
from .roles import RoleLayout, layouts_of
from .rules import gcs_location, weights_source
from .server_parts import CONTAINER, PORT
from .sizing import (
    WeightsCache,
    container_size,
    describe_cache,
    describe_rollout,
    weights_bytes_of,
    weights_cache,
)

REQUEST = '{{"model": "{name}", "prompt": "The capital of France is", "max_tokens": 16}}'


class ServicePlan(NamedTuple):
    """One service as the stack declares it."""

    service: ServingConfig
    pool: GpuPool
    args: InferenceServiceArgs
    nodes: int
    """Nodes a replica spans (1: a Deployment; more: a LeaderWorkerSet)."""
    surge: bool
    cache: WeightsCache
    roles: tuple[RoleLayout, ...] = ()
    """A disaggregated service's roles (none for one workload)."""

    @property
    def spans_nodes(self) -> bool:
        """A replica (or a role's) is a LeaderWorkerSet: the cluster needs the LWS controller."""
        return self.nodes > 1 or any(layout.nodes > 1 for layout in self.roles)

    @property
    def resource_name(self) -> str:
        return f"serve-{self.service.name}"

    @property
    def wait_minutes(self) -> int:
        """How long `pulumi up` and the wait command wait for the replicas (a Hyperdisk ML volume is
        filled first)."""
        hyperdisk = self.service.weights.via == "hyperdiskMl"
        return (ROLLOUT_TIMEOUT_S + (TRANSFER_TIMEOUT_S if hyperdisk else 0)) // 60

    def summary(self, url: Any) -> dict[str, Any]:
        """The stack output `serving.<name>`: where it answers (`url`, the component's service_url) and
        how to try it."""
        service, pool, namespace = self.service, self.pool, self.service.namespace
        replicas, fixed = service.replicas, service.replicas.max == service.replicas.min
        timeout = f"--timeout={self.wait_minutes}m"
        summary: dict[str, Any] = {
            "pool": pool.name,
            "url": url,
            "namespace": namespace,
            "model": service.model,
            "weights": self._weights_line(),
            "rollout": describe_rollout(pool, service.gpus_per_replica, replicas.min, self.surge),
            "gpusPerReplica": service.gpus_per_replica,
            "replicas": replicas.max if fixed else {"min": replicas.min, "max": replicas.max},
            "scaling": "fixed"
            if fixed
            else (
                "GPU duty cycle (kubernetes.io/container/accelerator/duty_cycle), 80% a GPU (HPA through the "
                "custom metrics adapter)"
                if service.scale_on == "gpu"
                else "vllm:num_requests_waiting, 5 per replica (HPA through the custom metrics adapter)"
            ),
            "commands": {
                "wait": f"kubectl rollout status -n {namespace} deployment/{service.name} {timeout}",
                "portForward": f"kubectl port-forward -n {namespace} service/{service.name} {PORT}:{PORT}",
                "ask": f"curl -s localhost:{PORT}/v1/completions -H 'Content-Type: application/json' -d "
                f"'{REQUEST.format(name=service.name)}'",
                "logs": f"kubectl logs -n {namespace} deployment/{service.name} -c {CONTAINER}",
            },
        }
        if self.nodes > 1:
            group, nodes = group_name(service.name), self.nodes
            per_node = service.gpus_per_replica // nodes
            summary["nodesPerReplica"] = nodes
            summary["layout"] = (
                f"LeaderWorkerSet {group}: replica i is {nodes} Pods on {nodes} nodes, the leader "
                f"{group}-i (the API) and {nodes - 1} headless worker(s) {group}-i-n; tensor parallel "
                f"{per_node} within each node, pipeline parallel {nodes} across them"
            )
            summary["commands"] |= {
                "wait": f"kubectl wait -n {namespace} leaderworkerset/{group} --for=condition=Available "
                f"{timeout}",
                "logs": f"kubectl logs -n {namespace} {group}-0 -c {CONTAINER}",
                "workerLogs": f"kubectl logs -n {namespace} {group}-0-1 -c {CONTAINER}",
            }
        if self.roles:
            # No one workload: each role's size, rollout and commands (pd_plan.py).
            for key in ("gpusPerReplica", "replicas"):
                del summary[key]
            del summary["commands"]["wait"]
            summary["commands"]["logs"] = (
                f"kubectl logs -n {namespace} deployment/{service.name}-decode -c {CONTAINER}"
            )
            summary["scaling"] = "fixed (each role's replicas)"
            summary["rollout"] = "; ".join(
                f"{layout.role}: "
                + describe_rollout(
                    pool, layout.gpus, layout.replicas, self.surge, f"disaggregation.{layout.role}.replicas"
                )
                for layout in self.roles
            )
            summary["disaggregation"] = disaggregated_summary(service, list(self.roles), timeout)
        if service.weights.via == "hyperdiskMl":
            volume = self._hyperdisk_ml_volume()
            summary["hyperdiskMl"] = volume
            summary["commands"]["transfer"] = f"kubectl describe pvc -n {namespace} {volume['claim']}"
        return summary

    def _weights_line(self) -> str:
        service = self.service
        if service.weights.via == "hyperdiskMl":
            return self._hyperdisk_ml_line()
        if weights_source(service.model) == "gcs":
            bucket, path = gcs_location(service.model)
            line = (
                f"Cloud Storage FUSE: gs://{bucket}/{path}, read-only, as the service's own account, its "
                f"sidecar unlimited; {describe_cache(self.cache)}"
            )
            return line + ("; parallel downloads" if self.cache.size_gib else "")
        token = service.hf_token_secret or "none, a public model"
        return f"downloaded from Hugging Face at start ({service.model}, token: {token})"

    def _zones(self) -> list[str]:
        return sorted(self.pool.zones or ())

    def _hyperdisk_ml_line(self) -> str:
        """Which path the weights take and why."""
        bucket, path = gcs_location(self.service.model)
        weights, zones = self.service.weights, self._zones()
        where = (
            f"in {zones[0]}"
            if len(zones) == 1
            else f"one disk in each of {len(zones)} zones ({', '.join(zones)})"
        )
        return (
            f"Hyperdisk ML {weights.size_gib} GiB at {throughput(weights)} MiB/s, {where} (weights.via "
            f"hyperdiskMl): filled once from gs://{bucket}/{path}/ by the GKE Volume Populator before the "
            "first replica starts, then mounted read-only by every replica at once (no Cloud Storage FUSE "
            "sidecar, no replica reading the bucket)"
        )

    def _hyperdisk_ml_volume(self) -> dict[str, Any]:
        weights, zones = self.service.weights, self._zones()
        assert weights.size_gib is not None, "the rules require a size with via hyperdiskMl"
        return {
            "sizeGib": weights.size_gib,
            "throughputMiBps": throughput(weights),
            "zones": zones,
            "disks": len(zones),
            "claim": f"weights-{volume_key(self.service.model, weights, zones)}",
        }

    def gateway_args(self, proxy_only_cidr: str) -> InferenceGatewayArgs:
        args: InferenceGatewayArgs = {"service": self.service.name, "proxy_only_cidr": proxy_only_cidr}
        if self.nodes > 1:  # a LeaderWorkerSet: the pool takes its leaders only
            args["leaders_only"] = True
        if self.roles:  # every Pod of both roles; each data-parallel rank's port
            args["disaggregated"] = True
            ports = sorted({port for layout in self.roles for port in layout.api_ports})
            if ports != [PORT]:
                args["target_ports"] = ports
        return args

    def gateway_summary(self, region: str | None, proxy_only_cidr: str) -> dict[str, Any]:
        """The stack output `serving.<name>.gateway`: how to reach the service through its gateway."""
        name, namespace = self.service.name, self.service.namespace
        address = f"kubectl get gateway -n {namespace} {name} -o jsonpath='{{.status.addresses[0].value}}'"
        return {
            "name": name,
            "class": f"{GATEWAY_CLASS} (regional internal Application Load Balancer: reachable from the VPC "
            f"in {region})",
            "inferencePool": name,
            "endpointPicker": f"{epp_name(name)} ({EPP_CHART} {EPP_VERSION})",
            "proxyOnlyCidr": proxy_only_cidr,
            "commands": {
                "status": f"kubectl get gateway,httproute,inferencepool -n {namespace}",
                "address": address,
                "ask": f"ADDRESS=$({address}); curl -s http://$ADDRESS/v1/completions -H "
                f"'Content-Type: application/json' -d '{REQUEST.format(name=name)}'  "
                "# from a VM or Pod in the VPC",
            },
        }


def plan_service(
    service: ServingConfig,
    pool: GpuPool,
    *,
    autopilot: bool,
    surge: bool,
    project: str,
    cluster_name: str,
    image: str,
) -> ServicePlan:
    """The plan of a service the stack rules accepted, on its pool (`surge`: whether the pool has room
    for a rollout's surge replica, sizing.surge_services)."""
    disaggregated = service.disaggregation is not None
    layouts = layouts_of(service, pool.gpus_per_node)
    nodes = nodes_per_replica(service, pool)
    # A disaggregated service's Pod sizes are its roles' (role_sizes); its own, its smallest role's.
    per_pod = min(r.gpus_per_pod for r in layouts) if disaggregated else service.gpus_per_replica // nodes
    # The settings the section and the component share (ModelServerSettings), by their snake_case names:
    # each is written once, in the shared model. A disaggregated service's replicas are its roles'.
    shared = service.model_dump(
        include=set(ModelServerSettings.model_fields),
        exclude={"gpus_per_replica"} if disaggregated else set(),
        exclude_none=True,
    )
    args = cast(InferenceServiceArgs, shared)
    if not disaggregated:
        args["replicas"] = service.replicas.min
    args |= {
        "name": service.name,
        "node_selector": node_selector(pool, autopilot=autopilot),
        # The GPU, for the fit rules, where the selector does not name it (a ComputeClass's).
        "accelerator": pool.accelerator,
        "tolerations": tolerations(pool, autopilot=autopilot),  # type: ignore[typeddict-item]
        "project": project,
        "cluster_name": cluster_name,
        "image": image,
    }
    size = container_size(pool, per_pod)
    args["cpu"], args["memory_gib"], args["shm_gib"] = size["cpu"], size["memory_gib"], size["shm_gib"]
    args["disk_gib"] = size["disk_gib"]
    # A Pod's file cache: one node's share of a replica that spans nodes.
    cache = weights_cache(pool, per_pod, weights_bytes_of(service))
    if service.weights.via == "hyperdiskMl":
        args["zones"] = list(pool.zones or ())
    elif weights_source(service.model) == "gcs" and cache.size_gib:
        args["weights_cache_gib"], args["weights_cache_medium"] = cache.size_gib, cache.medium
    if surge:
        args["surge"] = True
    if service.replicas.max > service.replicas.min:
        args["max_replicas"] = service.replicas.max
    if nodes > 1 and not disaggregated:
        args["gpus_per_node"] = per_pod
    if pool.dra_gpus:
        # GKE's device plugin is off there: the Pods claim their GPUs (dra/plan.py).
        args["dra_gpus"] = True
    if disaggregated:
        disaggregated_args(service, pool, layouts, args)
    elif uses_pool_nics(service, pool) and (nics := pool_gpu_nics(pool)) is not None:
        # A replica over nodes talks across them: on the GPU NICs where the pool has them.
        args["gpu_nics"] = cast(GpuNicsArgs, nics.model_dump())
    return ServicePlan(
        service=service, pool=pool, args=args, nodes=nodes, surge=surge, cache=cache, roles=tuple(layouts)
    )


def load_test_args(service: ServingConfig, pool: GpuPool, given: Mapping[str, float]) -> ServingLoadTestArgs:
    """The load test's args: the floors the stack file gives (`given`, by their snake_case names), each
    unset one the estimate for the pool's GPU."""
    estimate = default_floors(pool.accelerator, pool.mig_partition_size)
    gpu = pool.accelerator + (f" {pool.mig_partition_size}" if pool.mig_partition_size else "")
    extra: dict[str, Any] = {}
    if service.disaggregation is not None:
        # Through the gateway (its picker splits each request), at llm-d's P/D guide's lengths, judged
        # against its published figures where the stack file gives none.
        estimate = PD_GUIDE_FLOORS
        extra = {
            "gateway": True,
            "levels": list(PD_GUIDE_LEVELS),
            "prompt_words": PD_GUIDE_PROMPT_WORDS,
            "max_tokens": PD_GUIDE_OUTPUT_TOKENS,
        }
    args: ServingLoadTestArgs = {
        "service": service.name,
        "min_output_tok_s": given.get("output_tokens_per_second") or estimate.min_output_tok_s,
        "max_p99_ttft_ms": given.get("ttft_p99_ms") or estimate.max_p99_ttft_ms,
        "max_mean_tpot_ms": given.get("tpot_mean_ms") or estimate.max_mean_tpot_ms,
        "label": f"{service.name} on {gpu}",
    }
    return cast(ServingLoadTestArgs, args | extra)


def load_test_summary(
    service: ServingConfig, pool: GpuPool, args: ServingLoadTestArgs, given: Mapping[str, float], job: Any
) -> dict[str, Any]:
    """The stack output `serving.<name>.loadTest`: its floors (and where each came from), how to follow
    it (`job`: the test's job_name)."""
    namespace = service.namespace
    floors = {
        "outputTokensPerSecond": (args["min_output_tok_s"], "output_tokens_per_second"),
        "ttftP99Ms": (args["max_p99_ttft_ms"], "ttft_p99_ms"),
        "tpotMeanMs": (args["max_mean_tpot_ms"], "tpot_mean_ms"),
    }
    disaggregated = service.disaggregation is not None
    origin = f"third-party: {PD_GUIDE}" if disaggregated else f"estimate for {pool.accelerator}"
    levels = args.get("levels") or REFERENCE_LEVELS
    summary: dict[str, Any] = {
        "job": job,
        "levels": f"concurrency {', '.join(map(str, levels))}; the last is judged",
        "floors": {
            key: f"{value:g} ({'stack file' if field in given else origin})"
            for key, (value, field) in floors.items()
        },
        "commands": {
            "follow": f"kubectl logs -n {namespace} job/{JOB} -f",
            "result": f"kubectl logs -n {namespace} job/{JOB} | grep 'SERVING-LOAD RESULT'",
        },
    }
    if disaggregated:
        summary["requests"] = (
            f"through the Inference Gateway (its address read from the Gateway), prompts of about "
            f"{PD_GUIDE_INPUT_TOKENS} tokens and {PD_GUIDE_OUTPUT_TOKENS} output tokens (the guide's)"
        )
        if len(given) < len(floors):
            summary["note"] = (
                f"the floors not in the stack file are the published figures of {PD_GUIDE}, not a "
                f"measurement of {service.name}'s model and GPUs: set floors measured for it "
                "(workloads[].floors)"
            )
    elif service.gpus_per_replica > 1 and len(given) < len(floors):
        summary["note"] = (
            f"the estimates are for a model of up to 8B parameters on one GPU; {service.name} has "
            f"{service.gpus_per_replica} GPUs a replica, so set floors measured for its model "
            "(workloads[].floors)"
        )
    return summary
