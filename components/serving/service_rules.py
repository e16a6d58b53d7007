"""InferenceService's rules on its checked args (service_spec.py): the model server's (rules.py), the
model's fit on the replica's GPUs (fit.py: the rules the stack file's `serving` entries run too, so both
refuse the same inputs), and the args no section has.

The component learns its GPU from `accelerator`, else from its node selector's
`cloud.google.com/gke-accelerator` label (a GPU pool's selector on GKE Standard and Autopilot carries
it; a ComputeClass selector does not: then the GPUs' memory is not checked, and a note says so)."""

from __future__ import annotations

from ..core.catalog import load_catalog
from ..core.common import KeyNames, Problems, cut, listing
from ..core.k8s import check_toleration
from ..core.nodes import ACCELERATOR_LABEL, PARTITION_LABEL, SHARING_STRATEGY_LABEL
from .fit import Replica, check_fit, check_model, note_unchecked
from .hyperdisk_ml import check_volume_args
from .pd_fit import check_roles_fit
from .pd_rules import check_disaggregation, check_kv_transport
from .roles import RoleLayout
from .rules import DRA_DUTY_CYCLE_UNKNOWN, check_model_server, check_replica_nodes, weights_source
from .service_spec import InferenceServiceSpec

ARGS = KeyNames(camel=False)


def service_replica(spec: InferenceServiceSpec, problems: Problems) -> Replica:
    """Where the service's replicas run, for the fit rules: the GPU `accelerator` names, or the node
    selector's; a MIG partition (the selector's partition label) holds no whole GPU."""
    selected = spec.node_selector.get(ACCELERATOR_LABEL)
    name = spec.accelerator or selected
    catalog = load_catalog()
    accelerator = catalog.accelerator(name) if name else None
    if name is None:
        why = f"the GPU is not known: give accelerator, or a node_selector with {ACCELERATOR_LABEL}"
    elif accelerator is None:
        why = f"{cut(name)} is not a GPU type this package knows"
        if spec.accelerator is not None:
            problems.add("accelerator", f"{why}; known: {listing(sorted(catalog.accelerators))}")
    elif spec.accelerator is not None and selected is not None and selected != spec.accelerator:
        why, accelerator = "accelerator and the node selector name different GPUs", None
        problems.add(
            "accelerator",
            f"{cut(spec.accelerator)} is not the GPU node_selector picks ({ACCELERATOR_LABEL}: "
            f"{cut(selected)}): the replicas run on {cut(selected)} GPUs; leave accelerator out, or make "
            "them the same",
        )
    elif SHARING_STRATEGY_LABEL in spec.node_selector:
        why, accelerator = "the node selector picks shared GPUs", None
    else:
        why = ""
    return Replica(
        gpus=spec.gpus_per_replica,
        # A MIG partition (the selector's partition label) is no whole GPU: its memory is not counted.
        tensor_parallel=None if PARTITION_LABEL in spec.node_selector else spec.gpus_per_pod,
        accelerator=accelerator,
        unknown_gpu=why,
        download_gib=spec.disk_gib,
        download_fix=" (disk_gib): raise disk_gib",
        mig_partition=spec.node_selector.get(PARTITION_LABEL),
    )


def _fit(
    spec: InferenceServiceSpec, problems: Problems, notes: list[str] | None, layouts: list[RoleLayout]
) -> None:
    replica = service_replica(spec, problems)
    if not weights_source(spec.model):
        return
    if spec.disaggregation is None:
        check_fit(spec, replica, ARGS, problems, notes)
        return
    if not layouts:  # the roles' shape is refused: their fit would follow from it
        return
    facts = check_model(
        spec, None, ARGS, problems, notes, download_gib=spec.disk_gib, download_fix=replica.download_fix
    )
    if facts is not None:
        check_roles_fit(
            spec, facts, layouts, replica.accelerator, ARGS, problems, notes, gpus_per_node=spec.gpus_per_node
        )
        note_unchecked(facts, spec, replica, ARGS, notes)


def _disaggregation(
    spec: InferenceServiceSpec, problems: Problems, notes: list[str] | None
) -> list[RoleLayout]:
    """A disaggregated service's roles (pd_rules.py), and the args it takes from them."""
    layouts = check_disaggregation(
        spec, ARGS, problems, gpus_per_node=spec.gpus_per_node, set_fields=spec.model_fields_set
    )
    if spec.disaggregation is None:
        if spec.role_sizes is not None:
            problems.add("role_sizes", "only allowed with disaggregation (each role's Pod size)")
        return layouts
    for field in ("replicas", "max_replicas", "queue_target", "duty_cycle_target"):
        if field in spec.model_fields_set:
            problems.add(
                field,
                "not allowed with disaggregation: each role's replicas are fixed (disaggregation."
                "prefill.replicas, disaggregation.decode.replicas)",
            )
    check_kv_transport(
        spec,
        layouts,
        spec.gpu_nics,
        ARGS,
        problems,
        notes,
        no_nics="give gpu_nics (the pool's GPUDirect RDMA flavour and networking), or kv_transport tcp",
        whole_node_fix="a DRANET pool (gpu_nics.networking dranet)",
    )
    return layouts


def service_notes(spec: InferenceServiceSpec) -> list[str]:
    """What the args leave for the user to check (a plain program's warnings: the stack reports its
    own)."""
    notes: list[str] = []
    _fit(spec, Problems(), notes, _disaggregation(spec, Problems(), notes))
    return notes


def service_rules(spec: InferenceServiceSpec) -> list[str]:
    problems = Problems()
    check_model_server(spec, ARGS, problems)
    _fit(spec, problems, None, _disaggregation(spec, problems, None))
    if spec.gpus_per_node is not None:
        per_node = f"gpus_per_node {spec.gpus_per_node}"
        check_replica_nodes(spec.gpus_per_replica, spec.gpus_per_node, per_node, ARGS, problems)
    for i, toleration in enumerate(spec.tolerations):
        check_toleration(f"tolerations[{i}]", toleration, problems)
    if spec.max_replicas is not None and spec.max_replicas < spec.replicas:
        problems.add("max_replicas", f"{spec.max_replicas} is less than replicas {spec.replicas}")
    if "queue_target" in spec.model_fields_set and (spec.max_replicas is None or spec.scale_on == "gpu"):
        problems.add("queue_target", "only allowed with max_replicas and scale_on queue (its target)")
    if "duty_cycle_target" in spec.model_fields_set and (spec.max_replicas is None or spec.scale_on != "gpu"):
        problems.add("duty_cycle_target", "only allowed with max_replicas and scale_on gpu (its target)")
    if spec.scale_on is not None and spec.max_replicas is None:
        problems.add("scale_on", "only allowed with max_replicas (what the autoscaler scales on)")
    if spec.scale_on == "gpu" and spec.dra_gpus:
        problems.add("scale_on", f"gpu is not allowed with dra_gpus: {DRA_DUTY_CYCLE_UNKNOWN}; use queue")
    if spec.weights_cache_gib and weights_source(spec.model) != "gcs":
        problems.add(
            "weights_cache_gib",
            f"{spec.weights_cache_gib} is only allowed with a gs:// model (a Cloud Storage FUSE file cache)",
        )
    if "weights_cache_medium" in spec.model_fields_set and not spec.weights_cache_gib:
        problems.add("weights_cache_medium", "only allowed with weights_cache_gib above 0")
    check_volume_args(spec, problems)
    if spec.shm_gib >= spec.memory_gib:
        problems.add(
            "shm_gib", f"{spec.shm_gib} is not less than memory_gib {spec.memory_gib} (it counts in it)"
        )
    return problems.items
