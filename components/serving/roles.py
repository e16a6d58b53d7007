"""The layout of a disaggregated service's roles (prefill and decode), as plain data: how many replicas,
how many GPUs a Pod takes and how many Pods (nodes) a replica spans, vLLM's tensor and data parallel
sizes, and the ports each role listens on. Pure: the rules (pd_rules.py), the Pod's parts
(role_parts.py), the workloads (disaggregated.py), the gateway's values and the plan read it.

Sources (docs/serving.md, "Disaggregated prefill and decode", lists them in full):
- llm-d v0.9.0 (llm-d/llm-d@1aecf03f) guides/recipes/modelserver/base/single-host/pd: prefill's vLLM on
  8000, decode's on 8200 behind the routing sidecar on 8000, the NIXL side channel port 5600;
  guides/wide-ep-lws/modelserver/gpu/vllm/base/{prefill,decode}.yaml: one API server a data-parallel
  rank on consecutive ports from 8000 (8200 on decode), the supervisor's health on 8008 (8208), the
  data-parallel RPC port 5555, the sidecar listening on one port a rank.
- vLLM 0.33.0: envs.py (VLLM_NIXL_SIDE_CHANNEL_PORT 5600; the port a rank opens is it plus the rank's
  data-parallel index, config/parallel.py), entrypoints/launchers/dp_supervisor.py (a rank's server on
  --port + its local rank; --data-parallel-size-local at least 2; the supervisor's port apart from
  them).
- llm-d-router v0.10.0 pkg/sidecar/proxy/options.go: the sidecar's --port 8000 and
  --model-server-port 8200 defaults, --data-parallel-size (one port a rank from --port)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .model import DECODE, PREFILL, ModelServerSettings

if TYPE_CHECKING:
    from .service_spec import InferenceServiceSpec

# The port the InferencePool and the Service reach on every role: prefill's vLLM, decode's sidecar.
API_PORT = 8000
# Decode's vLLM, behind its sidecar (the sidecar's --model-server-port default).
DECODE_VLLM_PORT = 8200
# The data-parallel supervisor's health port, past the ranks' ports (at most 8 ranks on a node).
SUPERVISOR_OFFSET = 8
NIXL_SIDE_CHANNEL_PORT = 5600
DATA_PARALLEL_RPC_PORT = 5555
# The label llm-d's endpoint picker filters roles by (prefill-filter, decode-filter).
ROLE_LABEL = "llm-d.ai/role"


class RoleLayout(NamedTuple):
    """One role of a disaggregated service."""

    role: str
    replicas: int
    gpus: int
    """GPUs of one replica."""
    gpus_per_pod: int
    tensor_parallel: int
    expert_parallel: bool
    """vLLM's data and expert parallel (one API server a data-parallel rank, a supervisor)."""

    @property
    def nodes(self) -> int:
        """Pods (one a node) of one replica: 1 for a Deployment, more for a LeaderWorkerSet."""
        return self.gpus // self.gpus_per_pod

    @property
    def data_parallel(self) -> int:
        """Data-parallel ranks of one replica (1 without expert parallel)."""
        return self.gpus // self.tensor_parallel if self.expert_parallel else 1

    @property
    def data_parallel_local(self) -> int:
        """Data-parallel ranks on one Pod."""
        return self.gpus_per_pod // self.tensor_parallel if self.expert_parallel else 1

    @property
    def vllm_port(self) -> int:
        """vLLM's first API port on the Pod."""
        return DECODE_VLLM_PORT if self.role == DECODE else API_PORT

    @property
    def sidecar(self) -> bool:
        """The llm-d routing sidecar runs beside vLLM (decode only)."""
        return self.role == DECODE

    @property
    def api_ports(self) -> list[int]:
        """The ports the InferencePool reaches on a Pod of the role: one a data-parallel rank from
        8000 (prefill's vLLM, decode's sidecar)."""
        return [API_PORT + rank for rank in range(self.data_parallel_local)]

    @property
    def vllm_ports(self) -> list[int]:
        """vLLM's own API ports on a Pod of the role (its /metrics)."""
        return [self.vllm_port + rank for rank in range(self.data_parallel_local)]

    @property
    def supervisor_port(self) -> int | None:
        """The data-parallel supervisor's port (its /health and /readyz), with expert parallel only."""
        return self.vllm_port + SUPERVISOR_OFFSET if self.expert_parallel else None

    @property
    def nixl_ports(self) -> tuple[int, int]:
        """The first and last NIXL side channel ports a replica's ranks open (5600 plus the rank)."""
        return NIXL_SIDE_CHANNEL_PORT, NIXL_SIDE_CHANNEL_PORT + self.data_parallel - 1

    def workload_name(self, service: str) -> str:
        """The role's Deployment or LeaderWorkerSet: `<service>-prefill`, `<service>-decode`."""
        return f"{service}-{self.role}"


def layouts_of(settings: ModelServerSettings, gpus_per_node: int | None) -> list[RoleLayout]:
    """Prefill's and decode's layout on nodes of `gpus_per_node` GPUs (None: each replica on one node);
    none without disaggregation."""
    disaggregation = settings.disaggregation
    if disaggregation is None:
        return []
    ep = settings.expert_parallel
    layouts = []
    for role, config in ((PREFILL, disaggregation.prefill), (DECODE, disaggregation.decode)):
        per_pod = min(config.gpus_per_replica, gpus_per_node or config.gpus_per_replica)
        layouts.append(
            RoleLayout(
                role=role,
                replicas=config.replicas,
                gpus=config.gpus_per_replica,
                gpus_per_pod=per_pod,
                tensor_parallel=ep.tensor_parallel if ep is not None else per_pod,
                expert_parallel=ep is not None,
            )
        )
    return layouts


def role_layouts(spec: InferenceServiceSpec) -> list[RoleLayout]:
    """The component's roles, on its `gpus_per_node`."""
    return layouts_of(spec, spec.gpus_per_node)


def served_ports(spec: InferenceServiceSpec) -> list[int]:
    """Every port the service's Pods answer on: 8000; a disaggregated service's roles' API ports and
    vLLM's own (decode's, behind its sidecar, for the scraper)."""
    ports = {API_PORT}
    for layout in role_layouts(spec):
        ports |= {*layout.api_ports, *layout.vllm_ports}
    return sorted(ports)
