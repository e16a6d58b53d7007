"""The rules of a disaggregated service (prefill and decode apart) and of its expert parallel, for the
stack file's `serving` entries and InferenceService's args alike (only the key names differ: KeyNames;
the model's fit on each role is pd_fit.py's). Each refusal says why, with its source:

- expert parallel only with disaggregation: the layout built is llm-d's wide-EP path, a prefill and a
  decode LeaderWorkerSet (llm-d v0.9.0 guides/wide-ep-lws);
- a role's replica on one node unless it runs expert parallel: vLLM 0.33.0's NixlConnector refuses
  pipeline parallel on decode ("NixlPushConnector consumer (decode) does not support
  pipeline_parallel_size > 1", v1/nixl/base_worker.py) and its compatibility page lists pipeline
  parallel with the hybrid KV cache manager for the push connector only
  (docs/features/nixl_connector_compatibility.md);
- an expert-parallel replica over whole nodes, and at least two data-parallel ranks a Pod: vLLM's
  multi-port supervisor, which llm-d's wide-EP launch uses, refuses a local size below 2
  (entrypoints/launchers/dp_supervisor.py `validate_multi_port_external_lb_args`);
- DeepEP's all-to-all: on GKE it needs privileged Pods (GPU-initiated RDMA: llm-d v0.9.0
  docs/infrastructure/providers/gke/README.md) and, on RoCE, llm-d's own image with a patched NVSHMEM
  (guides/recipes/modelserver/components/images/README.md), which carries vLLM 0.26.0, not the
  pinned 0.33.0; the cluster's admission policies refuse privileged workload containers;
- the KV cache over RDMA needs the pool's GPU NICs (or `tcp`, said explicitly, with its cost: "Without
  RDMA, NIXL falls back to TCP for transfer which is not efficient and should only be used for
  testing and development", llm-d docs/architecture/advanced/disaggregation/README.md);
- on a multiNetwork pool, a Pod that gets the NICs takes its node's every GPU (a deviceMode RDMA
  Network gives its NIC to one Pod)."""

from __future__ import annotations

from ..core.common import KeyNames, Problems
from .gpu_nics import GpuNicsSpec, node_gpus, takes_whole_node
from .model import ModelServerSettings
from .roles import RoleLayout, layouts_of

DEEPEP_REFUSED = (
    "DeepEP's all-to-all needs privileged Pods on GKE (GPU-initiated RDMA through NVSHMEM: llm-d's GKE "
    "page) and, on RoCE, llm-d's image with its patched NVSHMEM, which runs vLLM 0.26.0, not the pinned "
    "0.33.0; the cluster's admission policies refuse privileged workload containers. Use "
    "allgatherReducescatter (NCCL collectives over the same NICs; docs/serving.md, 'Wide expert "
    "parallelism')"
)
TCP_COST = (
    "the KV cache (and an expert-parallel replica's all-to-all) travels over the Pod network's TCP, "
    "which llm-d calls 'not efficient and ... only ... for testing and development'"
)


def role_key(role: str, field: str = "gpus_per_replica") -> str:
    return f"disaggregation.{role}.{field}"


def check_disaggregation(
    settings: ModelServerSettings,
    names: KeyNames,
    problems: Problems,
    *,
    gpus_per_node: int | None,
    set_fields: set[str],
) -> list[RoleLayout]:
    """The shape of the roles on nodes of `gpus_per_node` GPUs (`set_fields`: the settings the user gave
    besides, whose meaning a disaggregated service takes from its roles); their layouts, or none where
    a problem keeps them from being laid out."""
    disaggregation, ep = settings.disaggregation, settings.expert_parallel
    if disaggregation is None:
        if ep is not None:
            problems.add(
                names.at("expert_parallel"),
                "only allowed with disaggregation: the wide expert parallel built is llm-d's wide-EP path, "
                "a prefill and a decode workload of data-parallel ranks (docs/serving.md, 'Wide expert "
                "parallelism')",
            )
        return []
    if "gpus_per_replica" in set_fields:
        problems.add(
            names.at("gpus_per_replica"),
            f"not allowed with disaggregation: each role's {names.key('gpus_per_replica')} "
            f"({names.key(role_key('prefill'))}, {names.key(role_key('decode'))}) sizes its replicas",
        )
    if settings.scale_on is not None:
        problems.add(
            names.at("scale_on"),
            "not allowed with disaggregation: a role's replicas are fixed (no autoscaler is built for "
            "prefill and decode)",
        )
    if ep is not None and ep.all_to_all != "allgatherReducescatter":
        problems.add(names.at("expert_parallel.all_to_all"), f"{ep.all_to_all} is refused: {DEEPEP_REFUSED}")
    layouts = layouts_of(settings, gpus_per_node)
    sound = True
    for layout in layouts:
        sound &= _check_role(layout, names, problems, gpus_per_node=gpus_per_node)
    prefill, decode = layouts
    if sound and ep is not None and prefill.gpus_per_pod != decode.gpus_per_pod:
        problems.add(
            names.at(role_key("decode")),
            f"{decode.gpus} gives decode's Pods {decode.gpus_per_pod} GPUs and prefill's "
            f"{prefill.gpus_per_pod}: the InferencePool sends to the same ports (one a data-parallel rank) "
            "on every Pod, so both roles' Pods run as many ranks; give both roles whole nodes, or the same "
            "GPUs",
        )
        sound = False
    return layouts if sound else []


def _check_role(
    layout: RoleLayout, names: KeyNames, problems: Problems, *, gpus_per_node: int | None
) -> bool:
    key = names.at(role_key(layout.role))
    gpus = layout.gpus
    if not layout.expert_parallel:
        if gpus_per_node is not None and gpus > gpus_per_node:
            problems.add(
                key,
                f"{gpus} is more than a node's {gpus_per_node} GPUs: a disaggregated role's replica runs on "
                "one node (vLLM 0.33.0's NixlConnector takes no pipeline parallel on decode); with "
                f"{names.key('expert_parallel')} a MoE model's replica may span whole nodes",
            )
            return False
        return True
    if gpus_per_node is not None and gpus > gpus_per_node and gpus % gpus_per_node:
        below, above = gpus // gpus_per_node * gpus_per_node, (gpus // gpus_per_node + 1) * gpus_per_node
        problems.add(
            key,
            f"{gpus} is not a whole multiple of a node's {gpus_per_node} GPUs: an expert-parallel replica "
            f"larger than a node takes whole nodes; use {below} or {above}",
        )
        return False
    tp, per_pod = layout.tensor_parallel, layout.gpus_per_pod
    if per_pod % tp or per_pod // tp < 2:
        problems.add(
            names.at("expert_parallel.tensor_parallel"),
            f"{tp} leaves {layout.role}'s Pods of {per_pod} GPU(s) "
            + (f"{per_pod % tp} GPU(s) unused" if per_pod % tp else "one data-parallel rank")
            + ": vLLM's multi-port supervisor runs two or more data-parallel ranks a Pod (--data-parallel-"
            f"size-local); use a tensor parallel of at most {per_pod // 2} that divides {per_pod}",
        )
        return False
    return True


def check_kv_transport(
    settings: ModelServerSettings,
    layouts: list[RoleLayout],
    nics: GpuNicsSpec | None,
    names: KeyNames,
    problems: Problems,
    notes: list[str] | None,
    *,
    no_nics: str,
    whole_node_fix: str,
) -> None:
    """The KV cache's path: RDMA needs the GPU NICs (`no_nics`: why there are none, and the fix); on a
    multiNetwork pool each role's Pod takes a whole node (`whole_node_fix`); TCP is noted with its
    cost."""
    disaggregation = settings.disaggregation
    if disaggregation is None:
        return
    key = names.at("disaggregation.kv_transport")
    if disaggregation.kv_transport == "tcp":
        if notes is not None:
            unused = f"; the pool's GPU NICs ({nics.flavor}) go unused" if nics is not None else ""
            notes.append(f"note: {key}: tcp: {TCP_COST}{unused}")
        return
    if nics is None:
        problems.add(key, f"rdma needs the GPU NICs of a GPUDirect RDMA pool: {no_nics}")
        return
    if nics.networking != "multiNetwork":
        return
    for layout in layouts:
        if not takes_whole_node(nics, layout.gpus_per_pod):
            node = node_gpus(nics)
            problems.add(
                names.at(role_key(layout.role)),
                f"{layout.gpus} takes {layout.gpus_per_pod} of a node's {node} GPUs, and on a multiNetwork "
                "pool a GPU NIC's Network goes to one Pod of the node, so only a Pod of every GPU gets "
                f"the NICs; use {node} (a whole node), or {whole_node_fix}",
            )
