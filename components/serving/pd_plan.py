"""The serving plan's part for a disaggregated service (plan.py calls it): InferenceService's args for its
roles (each role's Pod size on the pool, the pool's GPU NICs, its node size), and the stack output's
words for the roles, their layout and the commands that check the KV transfer and the expert-parallel
ranks on a cluster. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..gpu.pool import GpuPool
from .gpu_nics import GpuNicsArgs
from .model import PREFILL, ServingConfig
from .pd_pool_rules import pool_gpu_nics, uses_pool_nics
from .role_args import PodSizeArgs, RoleSizesArgs
from .role_parts import ALL2ALL, SIDECAR_CONTAINER, kv_transfer_config
from .roles import RoleLayout
from .rules import weights_source
from .server_parts import CONTAINER
from .sizing import container_size, weights_bytes_of, weights_cache

if TYPE_CHECKING:
    from .inference_service import InferenceServiceArgs


def disaggregated_args(
    service: ServingConfig, pool: GpuPool, layouts: list[RoleLayout], args: InferenceServiceArgs
) -> None:
    """Add the roles' args: the node's GPUs (a role's replica over whole nodes), each role's Pod size and
    file cache on the pool, and the pool's GPU NICs where the KV cache travels over RDMA."""
    disaggregation = service.disaggregation
    assert disaggregation is not None, "a disaggregated service"
    if pool.gpus_per_node:
        args["gpus_per_node"] = pool.gpus_per_node
    sizes: dict[str, PodSizeArgs] = {}
    for layout in layouts:
        size = container_size(pool, layout.gpus_per_pod)
        role: PodSizeArgs = {
            "cpu": size["cpu"],
            "memory_gib": size["memory_gib"],
            "shm_gib": size["shm_gib"],
            "disk_gib": size["disk_gib"],
        }
        cache = weights_cache(pool, layout.gpus_per_pod, weights_bytes_of(service))
        if service.weights.via != "hyperdiskMl" and weights_source(service.model) == "gcs" and cache.size_gib:
            role["weights_cache_gib"], role["weights_cache_medium"] = cache.size_gib, cache.medium
        sizes[layout.role] = role
    args["role_sizes"] = cast(RoleSizesArgs, sizes)
    nics = pool_gpu_nics(pool)
    if nics is not None and uses_pool_nics(service, pool):
        args["gpu_nics"] = cast(GpuNicsArgs, nics.model_dump())


def _layout_line(layout: RoleLayout, model: str) -> str:
    if not layout.expert_parallel:
        return (
            f"{layout.replicas} x {layout.gpus} GPU(s), a Deployment (tensor parallel "
            f"{layout.tensor_parallel}; vLLM on {layout.vllm_port})"
        )
    return (
        f"{layout.replicas} x {layout.gpus} GPUs, "
        + (f"a LeaderWorkerSet of {layout.nodes} Pods (one a node)" if layout.nodes > 1 else "a Deployment")
        + f": {layout.data_parallel} data-parallel ranks of tensor parallel {layout.tensor_parallel} "
        f"({layout.data_parallel_local} a Pod, API ports {layout.vllm_ports[0]}-{layout.vllm_ports[-1]}), "
        f"expert parallel {layout.gpus} over {model}'s experts"
    )


def _first_pod(layout: RoleLayout, service: str) -> str:
    """kubectl's name of a Pod of the role: its Deployment's, or its first group's leader."""
    workload = layout.workload_name(service)
    return f"deploy/{workload}" if layout.nodes == 1 else f"pod/{workload}-0"


def disaggregated_summary(service: ServingConfig, layouts: list[RoleLayout], wait: str) -> dict[str, Any]:
    """The stack output's `disaggregation`: each role's layout and workload, the KV transfer, and the
    commands (`wait`: the timeout flag) to follow the roles, see the KV transfer and the ranks."""
    disaggregation = service.disaggregation
    assert disaggregation is not None, "a disaggregated service"
    namespace, name = service.namespace, service.name
    roles: dict[str, Any] = {}
    commands: dict[str, str] = {}
    for layout in layouts:
        workload = layout.workload_name(name)
        kind = "leaderworkerset" if layout.nodes > 1 else "deployment"
        roles[layout.role] = {
            "replicas": layout.replicas,
            "gpusPerReplica": layout.gpus,
            "workload": f"{kind}/{workload}",
            "layout": _layout_line(layout, name),
            "kvRole": "kv_producer" if layout.role == PREFILL else "kv_consumer",
        }
        commands[f"{layout.role}Wait"] = (
            f"kubectl wait -n {namespace} {kind}/{workload} --for=condition=Available {wait}"
        )
        selector = f"llm-d.ai/role={layout.role}"
        commands[f"{layout.role}Logs"] = (
            f"kubectl logs -n {namespace} -l {selector} -c {CONTAINER} --tail=200 --max-log-requests=20"
        )
    ep = service.expert_parallel
    decode = layouts[1]
    commands |= {
        # The NixlConnector logs its transfers' metrics ("KV Transfer metrics: ...") and exports vllm:nixl_*.
        "kvTransfer": f"kubectl logs -n {namespace} -l llm-d.ai/role=decode -c {CONTAINER} | grep -i nixl",
        "kvTransferMetrics": f"kubectl exec -n {namespace} {_first_pod(decode, name)} -c {CONTAINER} -- "
        f"python3 -c \"import urllib.request;print(urllib.request.urlopen('http://localhost:{decode.vllm_port}"
        "/metrics').read().decode())\" | grep vllm:nixl_",
        "sidecar": f"kubectl logs -n {namespace} -l llm-d.ai/role=decode -c {SIDECAR_CONTAINER}",
        "picker": f"kubectl logs -n {namespace} deployment/{name}-epp | grep -i -e prefill -e disagg",
    }
    if ep is not None:
        # vLLM 0.33.0's supervisor logs "Started DPSupervisor", "Launching vLLM DP Servers" and "DPSupervisor
        # probe found N unhealthy DP Servers" (entrypoints/launchers/dp_supervisor.py); each rank answers
        # /health on its own port.
        prefill = layouts[0]
        first, last = prefill.vllm_ports[0], prefill.vllm_ports[-1]
        commands["ranks"] = (
            f"kubectl logs -n {namespace} -l llm-d.ai/role=prefill -c {CONTAINER} | grep DPSupervisor"
        )
        commands["rankHealth"] = (
            f'kubectl exec -n {namespace} {_first_pod(prefill, name)} -c {CONTAINER} -- python3 -c "import '
            "urllib.request;[print(p, urllib.request.urlopen(f'http://localhost:{p}/health').status) "
            f'for p in range({first}, {last + 1})]"'
        )
    summary: dict[str, Any] = {
        "roles": roles,
        "kvTransfer": f"vLLM's NixlConnector ({kv_transfer_config(PREFILL)} on prefill, kv_consumer on "
        "decode) "
        + (
            "over the pool's GPUDirect RDMA NICs (UCX)"
            if disaggregation.kv_transport == "rdma"
            else "over the Pod network's TCP (UCX's TCP transport: for testing only)"
        ),
        "routing": "the Inference Gateway's endpoint picker runs llm-d's P/D profiles: a decode Pod, then a "
        "prefill Pod for decode's routing sidecar (x-prefiller-host-port)",
        "commands": commands,
    }
    if ep is not None:
        summary["expertParallel"] = f"--enable-expert-parallel, --all2all-backend={ALL2ALL[ep.all_to_all]}"
    return summary
