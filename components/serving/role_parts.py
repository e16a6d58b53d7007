"""The Pod of a disaggregated service's role (prefill or decode), derived from the server's Pod
(server_pod.py): vLLM with the NixlConnector (`--kv-transfer-config`), on its role's port; with expert
parallel, one API server a data-parallel rank under vLLM's supervisor; on decode, llm-d's routing
sidecar in front; on a GPUDirect RDMA pool, the GPU NICs (gpu_nics.py).

Sources (docs/serving.md, "Disaggregated prefill and decode", gives each):
- vLLM 0.33.0 docs/features/nixl_connector_usage.md ("KV Role Options": kv_producer for prefill,
  kv_consumer for decode; kv_both deprecated for NixlConnector, with a warning in
  v1/nixl/connector.py), config/kv_transfer.py (kv_load_failure_policy `fail`, the default, written
  out as llm-d does), envs.py (VLLM_NIXL_SIDE_CHANNEL_HOST: the address decode reaches the prefill's
  side channel at, `localhost` by default; VLLM_HTTP_TIMEOUT_KEEP_ALIVE 5 s; VLLM_ENGINE_READY_TIMEOUT_S
  600 s), engine/arg_utils.py and entrypoints/launchers/dp_supervisor.py (the data-parallel flags).
- llm-d v0.9.0 (llm-d/llm-d@1aecf03f): guides/pd-disaggregation/modelserver/gpu/vllm/base
  patch-prefill.yaml and patch-decode.yaml (the side channel host from status.podIP, prefill's
  keep-alive 120 s: "shorter than llm-d-routing-sidecar's default idle conn timeout"),
  guides/recipes/modelserver/base/single-host/pd/vllm/patch-sidecar.yaml (the sidecar as a native
  sidecar: --port=8000 --kv-connector=nixlv2 --secure-proxy=false), guides/wide-ep-lws/modelserver/
  gpu/vllm/base/{prefill,decode}.yaml (the wide-EP launch: --data-parallel-multi-port-external-lb,
  the supervisor's port, --enable-expert-parallel, the data-parallel size, local size, address, RPC
  port 5555 and start rank from LWS_WORKER_INDEX; the sidecar's --data-parallel-size and
  --enable-prefiller-sampling; probes on the supervisor)."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, cast

import pulumi_kubernetes as k8s

from ..core import images
from ..core.k8s import NONROOT_ID, restricted_container_security_context
from ..dra.claims import container_claim
from ..gpudirect.flavors import GpuDirectFlavor
from ..gpudirect.pod_parts import POD_CLAIM, gpudirect_pod_parts
from .gpu_nics import GpuNicsSpec, nic_env, nic_template_name, pod_nics
from .model import PREFILL
from .roles import DATA_PARALLEL_RPC_PORT, NIXL_SIDE_CHANNEL_PORT, RoleLayout
from .server_parts import pod_annotations, vllm_args
from .server_pod import PROBE_TIMEOUT_S, STARTUP_FAILURES, STARTUP_PERIOD_S, server_pod_spec

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec

SIDECAR_CONTAINER = "routing-proxy"
# The sidecar's size: llm-d's manifests give it none (`resources: {}`); ours is bounded. A Go reverse
# proxy of one Pod's requests (UNVERIFIED under load).
SIDECAR_RESOURCES = {
    "requests": {"cpu": "250m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "512Mi"},
}
# vLLM's all2all backends by the stack file's names (vllm/config/parallel.py All2AllBackend).
ALL2ALL = {
    "allgatherReducescatter": "allgather_reducescatter",
    "deepepHighThroughput": "deepep_high_throughput",
    "deepepLowLatency": "deepep_low_latency",
}
# Prefill's keep-alive, above the sidecar's 90 s idle connections (llm-d's patch-prefill.yaml).
PREFILL_KEEP_ALIVE_S = 120
# The engine's start, within the startup probe's 30 minutes (vLLM's default 600 s; llm-d's wide-EP
# prefill sets 3000): a wide-EP engine loads every rank's experts before it is ready.
ENGINE_READY_TIMEOUT_S = STARTUP_PERIOD_S * STARTUP_FAILURES


def kv_transfer_config(role: str) -> str:
    """`--kv-transfer-config`'s JSON: the NixlConnector, producing KV on prefill and consuming it on
    decode, a failed KV load failing the request rather than recomputing on decode."""
    return json.dumps(
        {
            "kv_connector": "NixlConnector",
            "kv_role": "kv_producer" if role == PREFILL else "kv_consumer",
            "kv_load_failure_policy": "fail",
        },
        separators=(",", ":"),
    )


def role_view(spec: InferenceServiceSpec, layout: RoleLayout) -> InferenceServiceSpec:
    """The args as one Pod of the role sees them: its GPUs (one node's, with its own tensor parallel),
    its replicas and its size (`role_sizes`, else the service's)."""
    size = getattr(spec.role_sizes, layout.role, None) if spec.role_sizes else None
    given = size.model_dump(exclude_none=True) if size is not None else {}
    return spec.model_copy(
        update={
            "gpus_per_replica": layout.gpus_per_pod,
            "gpus_per_node": None,
            "replicas": layout.replicas,
            "max_replicas": None,
            **given,
        }
    )


def role_vllm(spec: InferenceServiceSpec, layout: RoleLayout) -> tuple[list[str] | None, list[str]]:
    """(command, args) of the role's vLLM: the image's `vllm serve` with the role's arguments; with
    expert parallel on several nodes, a shell that computes the Pod's first data-parallel rank from
    LeaderWorkerSet's LWS_WORKER_INDEX (as llm-d's wide-EP launch does) and execs it."""
    view = role_view(spec, layout)
    args = vllm_args(view, port=layout.vllm_port, tensor_parallel=layout.tensor_parallel)
    args.append(f"--kv-transfer-config={kv_transfer_config(layout.role)}")
    if not layout.expert_parallel:
        return None, args
    ep = spec.expert_parallel
    assert ep is not None, "role_layouts sets expert_parallel from it"
    args += [
        "--enable-expert-parallel",
        f"--all2all-backend={ALL2ALL[ep.all_to_all]}",
        f"--data-parallel-size={layout.data_parallel}",
        f"--data-parallel-size-local={layout.data_parallel_local}",
        "--data-parallel-multi-port-external-lb",
        f"--data-parallel-supervisor-port={layout.supervisor_port}",
    ]
    if layout.nodes == 1:
        return None, args
    args += [
        "--data-parallel-address=$(LWS_LEADER_ADDRESS)",
        f"--data-parallel-rpc-port={DATA_PARALLEL_RPC_PORT}",
    ]
    first_rank = f"$((LWS_WORKER_INDEX * {layout.data_parallel_local}))"
    start = f'exec vllm serve "$@" --data-parallel-start-rank={first_rank}'
    return ["/bin/sh", "-c", start, "vllm"], args


def _field_env(name: str, path: str) -> k8s.core.v1.EnvVarArgs:
    return k8s.core.v1.EnvVarArgs(
        name=name,
        value_from=k8s.core.v1.EnvVarSourceArgs(
            field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path=path)
        ),
    )


def role_env(spec: InferenceServiceSpec, layout: RoleLayout) -> list[k8s.core.v1.EnvVarArgs]:
    """What the role's vLLM adds to the server's environment."""
    env = [_field_env("VLLM_NIXL_SIDE_CHANNEL_HOST", "status.podIP")]
    plain: dict[str, str] = {}
    if layout.role == PREFILL:
        plain["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"] = str(PREFILL_KEEP_ALIVE_S)
    if layout.expert_parallel:
        plain["VLLM_ENGINE_READY_TIMEOUT_S"] = str(ENGINE_READY_TIMEOUT_S)
    return env + [k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in plain.items()]


def uses_nics(spec: InferenceServiceSpec, layout: RoleLayout | None = None) -> GpuNicsSpec | None:
    """The GPU NICs a Pod gets: a role's where the KV cache travels over RDMA; an aggregated
    server's where its replica spans nodes (its tensor and pipeline parallel's NCCL)."""
    if spec.gpu_nics is None:
        return None
    if layout is not None:
        disaggregation = spec.disaggregation
        return spec.gpu_nics if disaggregation is not None and disaggregation.kv_transport == "rdma" else None
    return spec.gpu_nics if spec.nodes_per_replica > 1 else None


def role_ports(layout: RoleLayout) -> list[k8s.core.v1.ContainerPortArgs]:
    """vLLM's ports: its API (one a rank with expert parallel, and the supervisor's) and the NIXL side
    channel's (one a rank, 5600 plus the rank's global data-parallel index: the first is named)."""
    # Port names are the Pod's (unique across its containers): decode's vLLM gives the sidecar its names.
    prefix = "vllm-" if layout.sidecar else ""
    ports = [
        k8s.core.v1.ContainerPortArgs(
            name=f"{prefix}rank{rank}" if layout.expert_parallel else (prefix.strip("-") or "http"),
            container_port=port,
        )
        for rank, port in enumerate(layout.vllm_ports)
    ]
    if layout.supervisor_port is not None:
        ports.append(k8s.core.v1.ContainerPortArgs(name="supervisor", container_port=layout.supervisor_port))
    ports.append(k8s.core.v1.ContainerPortArgs(name="nixl", container_port=NIXL_SIDE_CHANNEL_PORT))
    return ports


def _probe(path: str, port: int, period: int, failures: int) -> k8s.core.v1.ProbeArgs:
    return k8s.core.v1.ProbeArgs(
        http_get=k8s.core.v1.HTTPGetActionArgs(path=path, port=port),
        period_seconds=period,
        failure_threshold=failures,
        timeout_seconds=PROBE_TIMEOUT_S,
    )


def routing_sidecar(layout: RoleLayout) -> k8s.core.v1.ContainerArgs:
    """llm-d's routing sidecar, a native sidecar (an init container that keeps running) in front of
    decode's vLLM: it reads the endpoint picker's `x-prefiller-host-port`, has the chosen prefill Pod
    compute the KV cache, then passes the request on to its own vLLM with the KV transfer's parameters
    (the `nixlv2` protocol). Plain HTTP inside the Pod network (--secure-proxy=false, as llm-d's
    guides); one port a data-parallel rank."""
    args = [
        f"--port={layout.api_ports[0]}",
        f"--model-server-port={layout.vllm_port}",
        "--kv-connector=nixlv2",
        "--secure-proxy=false",
    ]
    if layout.expert_parallel:
        args += [f"--data-parallel-size={layout.data_parallel_local}", "--enable-prefiller-sampling"]
    security = restricted_container_security_context()
    security.run_as_user = NONROOT_ID
    security.run_as_group = NONROOT_ID
    return k8s.core.v1.ContainerArgs(
        name=SIDECAR_CONTAINER,
        image=images.DISAGG_SIDECAR,
        restart_policy="Always",
        args=args,
        ports=[
            k8s.core.v1.ContainerPortArgs(
                name=f"rank{rank}" if layout.expert_parallel else "http", container_port=port
            )
            for rank, port in enumerate(layout.api_ports)
        ],
        resources=k8s.core.v1.ResourceRequirementsArgs(**cast(Any, SIDECAR_RESOURCES)),
        security_context=security,
    )


def role_pod(
    spec: InferenceServiceSpec, layout: RoleLayout
) -> tuple[k8s.core.v1.PodSpecArgs, dict[str, str] | None]:
    """The role's Pod and its annotations (the Cloud Storage FUSE sidecar's, a multiNetwork pool's
    NICs)."""
    view = role_view(spec, layout)
    pod = copy.copy(server_pod_spec(view))
    (server,) = cast(list[k8s.core.v1.ContainerArgs], pod.containers)
    container = copy.copy(server)
    container.command, container.args = role_vllm(spec, layout)
    container.env = [*cast(list[k8s.core.v1.EnvVarArgs], server.env), *role_env(spec, layout)]
    container.ports = role_ports(layout)
    if layout.supervisor_port is not None:
        # The supervisor answers for the Pod's ranks: /health once every rank serves, /readyz.
        health = layout.supervisor_port
        container.startup_probe = _probe("/health", health, STARTUP_PERIOD_S, STARTUP_FAILURES)
        container.readiness_probe = _probe("/readyz", health, 10, 3)
        container.liveness_probe = _probe("/health", health, 30, 6)
    else:
        port = layout.vllm_port
        container.startup_probe = _probe("/health", port, STARTUP_PERIOD_S, STARTUP_FAILURES)
        container.readiness_probe = _probe("/health", port, 10, 3)
        container.liveness_probe = _probe("/health", port, 30, 6)
    pod.containers = [container]
    annotations = dict(pod_annotations(view) or {})
    nics = uses_nics(spec, layout)
    if nics is not None:
        pod, more = attach_nics(pod, nics, layout.gpus_per_pod)
        annotations |= more
    if layout.sidecar:
        pod.init_containers = [routing_sidecar(layout)]
    return pod, annotations or None


def attach_nics(
    pod: k8s.core.v1.PodSpecArgs, nics: GpuNicsSpec, gpus_per_pod: int, *, kv_transfer: bool = True
) -> tuple[k8s.core.v1.PodSpecArgs, dict[str, str]]:
    """A copy of the server's Pod on the GPU NICs, and the annotations it adds: on a multiNetwork pool
    the interfaces; on a DRANET pool the Pod's claim of its share of the NICs (its template: `rdma-<n>`,
    gpu_nics.nic_claim) and the vLLM container's use of it; the NICs' environment (gpu_nics.nic_env;
    `kv_transfer`: NIXL's UCX settings too)."""
    pod = copy.copy(pod)
    (server,) = cast(list[k8s.core.v1.ContainerArgs], pod.containers)
    container = copy.copy(server)
    env = nic_env(nics, kv_transfer=kv_transfer)
    container.env = [
        *cast(list[k8s.core.v1.EnvVarArgs], container.env or []),
        *(k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()),
    ]
    claim = nic_claim(nics, gpus_per_pod)
    if claim is not None:
        name, template = claim
        pod.resource_claims = [
            *cast(list[k8s.core.v1.PodResourceClaimArgs], pod.resource_claims or []),
            k8s.core.v1.PodResourceClaimArgs(name=name, resource_claim_template_name=template),
        ]
        resources = copy.copy(container.resources)
        assert isinstance(resources, k8s.core.v1.ResourceRequirementsArgs)
        resources.claims = [
            *cast(list[k8s.core.v1.ResourceClaimArgs], resources.claims or []),
            k8s.core.v1.ResourceClaimArgs(**container_claim(name)),
        ]
        container.resources = resources
    pod.containers = [container]
    return pod, nic_annotations(nics)


def nic_annotations(nics: GpuNicsSpec) -> dict[str, str]:
    """A multiNetwork Pod's annotations: gpudirect_pod_parts' (eth0 on the Pod network, then every GPU
    NIC of the node); none on DRANET."""
    if nics.networking != "multiNetwork":
        return {}
    return gpudirect_pod_parts(GpuDirectFlavor(nics.flavor))["annotations"]


def nic_claim(nics: GpuNicsSpec, gpus_per_pod: int) -> tuple[str, str] | None:
    """A DRANET Pod's claim: (the Pod's claim name, its template's name: `rdma-<n>`, the Pod's share of
    the node's NICs); None on multiNetwork."""
    if nics.networking != "dranet":
        return None
    return POD_CLAIM, nic_template_name(pod_nics(nics, gpus_per_pod))
