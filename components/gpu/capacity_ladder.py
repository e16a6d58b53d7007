"""A capacity ladder on a Standard cluster: one GPU pool whose nodes GKE takes from a reservation, then
on-demand, then flex-start, then Spot (whichever steps are listed, in their order), through a custom
ComputeClass with node pool auto-creation."""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import ProjectId, enum_values
from ..core.component import NO_ARGS, CheckedArgs, GkeGpuComponent
from ..core.k8s import COMPUTE_CLASS_API_VERSION, app_labels
from ..core.validation import Deferrable
from .compute_class import gpu_sharing
from .pool import CONTAINER_IMAGE_CACHE, GpuPool
from .pool_args import CapacityStep, GpuDriverVersion, GpuImageCache, GpuReservation, GpuSharing, NodeTaint
from .rules import check_standard_pool_args, validate_pool_args
from .scheduling import compute_class_name


class GpuCapacityLadderArgs(TypedDict):
    """A GPU pool served by a ComputeClass ladder: its GPU, where it runs, and the steps to try."""

    accelerator: str
    """A GKE accelerator, for example `nvidia-h100-80gb`."""
    # Strings, not CapacityStep: the SDK's provider decodes a list of a package enum into empty objects
    # (seen with pulumi 3.272.0; a single enum arg decodes fine). The model checks the values.
    capacity_ladder: list[str]
    """The steps in the order GKE tries them, each at most once: `reservation` (needs `reservation`),
    `onDemand`, `flexStart`, `spot`."""
    max_nodes: int
    """The pool's node limit: what Kueue's quota and the cost estimate count. A ComputeClass itself has
    no node limit; the project's GPU quota bounds it."""
    location: str
    """The cluster's region or zone."""
    project: str
    """The GCP project (a reservation named without a project is looked up there)."""
    name: NotRequired[str]
    """The pool's name; the ComputeClass is `gpu-<name>`. Defaults to the resource name."""
    gpus_per_node: NotRequired[int]
    """GPUs per node. Defaults to the accelerator's smallest machine type's count."""
    machine_type: NotRequired[str]
    """A machine type of the accelerator. Defaults to the one for `gpus_per_node`."""
    zones: NotRequired[list[str]]
    """Zones to create nodes in. Defaults to the catalog's zones of the accelerator in the region."""
    reservation: NotRequired[GpuReservation]
    """The reservation of the `reservation` step. Defaults to none."""
    max_run_duration: NotRequired[str]
    """With a flexStart step: how long a flex-start node may run (e.g. `24h`, at most `7d`)."""
    driver_version: NotRequired[GpuDriverVersion]
    """DEFAULT or LATEST. Defaults to DEFAULT."""
    sharing: NotRequired[GpuSharing]
    """GPU time-sharing on every rung's nodes. Defaults to none."""
    mig_partition_size: NotRequired[str]
    """A MIG profile for every rung's nodes. Defaults to none."""
    disk_size_gb: NotRequired[int]
    """Boot disk size in GB. Defaults to 200."""
    image_cache: NotRequired[GpuImageCache]
    """Container images preloaded from a secondary boot disk on every rung's nodes. GKE creates the
    rungs' node pools itself, so declare an ImageCacheAllowlist with the image too (one per cluster;
    the stack program does). Defaults to none."""
    labels: NotRequired[dict[str, str]]
    """Node labels. Defaults to none."""
    taints: NotRequired[list[NodeTaint]]
    """Node taints besides the GPU taint. Defaults to none."""
    node_service_account_email: NotRequired[pulumi.Input[str]]
    """The nodes' service account. Defaults to the Compute Engine default account (avoid it)."""


class GpuCapacityLadderSpec(GpuPool):
    """GpuCapacityLadder's args as checked: a GPU pool (the stack file's pool model, read with snake_case
    names) with its ladder, plus where it runs."""

    capacity_ladder: list[enum_values(CapacityStep)] = Field(min_length=1, max_length=4)  # type: ignore[valid-type]
    max_nodes: int = Field(ge=1, le=1000)
    location: str = Field(max_length=40)
    project: ProjectId
    node_service_account_email: Deferrable[Annotated[str, Field(max_length=254)]] | None = None


def check_capacity_ladder(spec: GpuCapacityLadderSpec) -> tuple[GpuPool | None, list[str], list[str]]:
    """The pool rules (ladder rules included) for the args: (the resolved pool or None, problems, notes)."""
    return check_standard_pool_args(spec, spec.location)


def capacity_ladder_args(
    pool: GpuPool, *, project: str, location: str, node_service_account_email: pulumi.Input[str] | None
) -> GpuCapacityLadderArgs:
    """GpuCapacityLadder's args for a stack file's pool, checked and resolved by the stack's run of the
    same pool rules (CheckedArgs: the component does not run them again)."""
    placement: dict[str, Any] = {"project": project, "location": location}
    if node_service_account_email is not None:
        placement["node_service_account_email"] = node_service_account_email
    args = {**pool.model_dump(exclude_none=True, exclude={"on_demand_fallback"}), **placement}
    return CheckedArgs(args, pool.as_spec(GpuCapacityLadderSpec, **placement))  # type: ignore[return-value]


def priorities(pool: GpuPool, project: str) -> list[dict[str, Any]]:
    """One ComputeClass priority rule per step, in the ladder's order (GKE tries them in order)."""
    assert pool.capacity_ladder and pool.machine_type, "a resolved ladder pool"
    gpu: dict[str, Any] = {
        "type": pool.accelerator,
        "count": pool.gpus_per_node,
        "driverVersion": pool.driver_version.lower(),
    }
    sharing = gpu_sharing(pool)
    if sharing:
        gpu["gpuSharing"] = sharing
    storage: dict[str, Any] = {"bootDiskSize": pool.disk_size_gb}
    if pool.disk_type:
        storage["bootDiskType"] = pool.disk_type
    if pool.local_ssd_count:
        # Required where the machine type has Local SSDs (GKE's ComputeClass reference).
        storage["localSSDCount"] = pool.local_ssd_count
    if pool.image_cache:
        cache = pool.image_cache
        storage["secondaryBootDisks"] = [
            {"diskImageName": cache.image_name, "project": cache.project, "mode": CONTAINER_IMAGE_CACHE}
        ]
    rules = []
    for step in pool.capacity_ladder:
        rule: dict[str, Any] = {"machineType": pool.machine_type, "gpu": gpu, "storage": storage}
        if step == CapacityStep.RESERVATION:
            rule["reservations"] = _reservations(pool, project)
        elif step == CapacityStep.FLEX_START:
            rule["flexStart"] = {"enabled": True}
            if pool.max_run_seconds:
                rule["maxRunDurationSeconds"] = pool.max_run_seconds
        elif step == CapacityStep.SPOT:
            rule["spot"] = True
        rules.append(rule)
    return rules


def _reservations(pool: GpuPool, project: str) -> dict[str, Any]:
    """The step's reservation: `AnyBestEffort` for type ANY (the ladder rules allow it last only: it
    falls back to on-demand itself), else the named one, shared (`projects/<p>/reservations/<r>`) or
    the project's, and its block (`<r>/reservationBlocks/<b>`) when named."""
    if pool.reservation.type == "ANY":
        return {"affinity": "AnyBestEffort"}
    base, _, block = (pool.reservation.name or "").partition("/reservationBlocks/")
    parts = base.split("/")
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == "reservations":
        project, base = parts[1], parts[3]
    specific: dict[str, Any] = {"name": base, "project": project}
    if block:
        specific["reservationBlock"] = {"name": block}
    return {"affinity": "Specific", "specific": [specific]}


_ARGS = GpuCapacityLadderArgs


class GpuCapacityLadder(GkeGpuComponent[GpuCapacityLadderSpec]):
    """A custom ComputeClass (cloud.google.com/v1) that gives one GPU pool its nodes from each step of
    its ladder in turn: a reservation, on-demand, DWS flex-start, Spot. GKE creates a node pool for a
    step when Pods need nodes (`nodePoolAutoCreation`) and moves to the next step when the step has
    no capacity; `whenUnsatisfiable: DoNotScaleUp` keeps Pods pending rather than landing them
    elsewhere. Pods select it with `cloud.google.com/compute-class: gpu-<name>` and tolerate its taint.

    The created pools use the pool's machine type, GPUs, driver, sharing or MIG, boot disk, zones,
    labels and taints, and the given node service account. A ComputeClass has no node limit:
    `max_nodes` is what Kueue's quota and the cost estimate count, and the project's GPU quota bounds
    the rest. GPUDirect is refused: a ComputeClass cannot attach the extra NICs. Needs GKE
    1.33.3-gke.1136000 or later."""

    class_name: pulumi.Output[str]
    """The ComputeClass's name, `gpu-<name>`: Pods select it with the node selector
    `cloud.google.com/compute-class`."""

    _args_model = GpuCapacityLadderSpec
    _args_by_name = True
    _args_type = GpuCapacityLadderArgs

    @classmethod
    def _check(cls, name: str, args: Any) -> tuple[GpuCapacityLadderSpec, list[str]]:
        """The pool with every default resolved, and the rules' notes."""
        pool, notes = validate_pool_args(
            "GpuCapacityLadder", name, GpuCapacityLadderSpec, args, check_capacity_ladder, _ARGS
        )
        assert isinstance(pool, GpuCapacityLadderSpec), "the rules resolve the spec's own type"
        return pool, notes

    def __init__(
        self,
        name: str,
        /,
        args: GpuCapacityLadderArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        pool = self._begin(name, args, opts)
        class_name = compute_class_name(pool)
        node_config: dict[str, Any] = {
            "taints": [
                {"key": t.key, "value": t.value, "effect": t.kubernetes_effect} for t in pool.all_taints
            ],
        }
        if pool.labels:
            node_config["nodeLabels"] = dict(pool.labels)
        if pool.image_cache:
            # GKE requires image streaming for a secondary boot disk; GpuNodePool always turns it on.
            node_config["imageStreaming"] = {"enabled": True}
        account = pool.node_service_account_email
        if account is not None:
            node_config["serviceAccount"] = account
        self.compute_class = k8s.apiextensions.CustomResource(
            f"{name}-class",
            api_version=COMPUTE_CLASS_API_VERSION,
            kind="ComputeClass",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=class_name, labels=app_labels(class_name, component="gpu-capacity-ladder")
            ),
            spec={
                "nodePoolAutoCreation": {"enabled": True},
                "whenUnsatisfiable": "DoNotScaleUp",
                "priorityDefaults": {"location": {"zones": list(pool.zones or [])}},
                "nodePoolConfig": node_config,
                "priorities": priorities(pool, pool.project),
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.class_name = pulumi.Output.from_input(class_name)
        self.register_outputs({"className": self.class_name})
