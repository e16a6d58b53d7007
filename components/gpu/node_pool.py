"""A GKE Standard node pool of NVIDIA GPUs, from args checked against the accelerator catalog."""

import hashlib
import math
from collections.abc import Sequence
from typing import Annotated, Any, TypeAlias, cast

import pulumi
from pulumi_gcp import compute, container
from pydantic import Field

from ..cluster.hardening import READ_ONLY_PORT_OFF, hardened_node_settings
from ..core.arg_types import ClusterName, NodeNetworks, ProjectId
from ..core.catalog import load_catalog
from ..core.common import ZONE_PATTERN, Problem
from ..core.component import NO_ARGS, CheckedArgs, GkeGpuComponent
from ..core.validation import Deferrable, pick
from ..gpudirect.flavors import DRANET_NETWORK_PROFILE, DRANET_NODE_LABEL, FLAVORS
from .bare_metal import bare_metal_node_settings
from .gke_rewrites import PoolKind, bundles_local_ssds, declared_labels, ignored_paths
from .pool import CONTAINER_IMAGE_CACHE, GpuPool
from .pool_args import GpuNodePoolArgs, NodeNetwork, node_network_list
from .rules import check_standard_pool_args, validate_pool_args

__all__ = [
    "REPLACE_ON_CHANGE",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "GpuNodePoolSpec",
    "check_gpu_node_pool",
    "node_pool_args",
    "validate_gpu_node_pool_args",
]

# Inputs whose change makes GKE delete and recreate the node pool, keyed by their camelCase path in
# the NodePool's inputs: the provider's ForceNew fields the program declares (terraform-provider-
# google-beta's resource_container_node_pool.go and node_config.go, which pulumi-gcp bridges;
# tests/test_replace_on_change.py checks this list against them). The offline render marks them, and
# `tools/render.py --diff` turns a change to any of them into "REPLACE". Zones (nodeLocations), machine
# type, disk size and type, image type, gVNIC, image streaming, labels and taints are updated in
# place: GKE adds or removes nodes, or recreates them one by one, but keeps the pool.
REPLACE_ON_CHANGE = (
    "name",
    "project",
    "cluster",
    "location",
    "placementPolicy",
    "queuedProvisioning",
    # A pool's NICs are fixed at creation (GKE's multi-network guide: node networks cannot be added
    # to or removed from an existing pool).
    "networkConfig.additionalNodeNetworkConfigs",
    # DRANET's managed networks (ForceNew in the provider's schema).
    "networkConfig.acceleratorNetworkProfile",
    "nodeConfig.guestAccelerators",
    "nodeConfig.spot",
    "nodeConfig.flexStart",
    "nodeConfig.maxRunDuration",
    "nodeConfig.reservationAffinity",
    "nodeConfig.ephemeralStorageLocalSsdConfig",
    "nodeConfig.serviceAccount",
    "nodeConfig.oauthScopes",
    "nodeConfig.metadata",
    "nodeConfig.shieldedInstanceConfig",
    # The preloaded disk image; GKE's guide: "When you modify the disk image, you must create a new
    # node pool".
    "nodeConfig.secondaryBootDisks",
)

# pulumi-gcp types this list of NodePoolNetworkConfigArgs as Args objects only; the provider takes the
# same keys as a dict too, which is what a NodeNetwork is (its ...AdditionalNodeNetworkConfigArgsDict).
_NodeNetworkConfigs: TypeAlias = (
    "pulumi.Input[Sequence[container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs]]"
)


class GpuNodePoolSpec(GpuPool):
    """GpuNodePool's args as checked: a GPU pool (the same model as a stack file's `gpuPools` entry, read
    with snake_case names) plus where it goes. The GPU count and the node limit are required here."""

    name: Annotated[str, Field(max_length=100)]
    gpus_per_node: int = Field(ge=1, le=16)
    max_nodes: int = Field(ge=1, le=1000)
    project: ProjectId
    location: Annotated[str, Field(max_length=40)]
    cluster_name: Deferrable[ClusterName]
    node_service_account_email: Deferrable[Annotated[str, Field(max_length=254)]] | None = None
    additional_node_networks: NodeNetworks | None = None


def check_gpu_node_pool(spec: GpuNodePoolSpec) -> tuple[GpuNodePoolSpec | None, list[str], list[str]]:
    """The catalog rules for a node pool's args: (the pool with every default resolved, or None;
    problems; notes). Problems name the args in snake_case."""
    pool, problems, notes = check_standard_pool_args(spec, spec.location)
    if pool is None:
        return None, problems, notes
    problems = _node_network_problems(pool)
    return (None if problems else pool), problems, notes


def _node_network_problems(pool: GpuNodePoolSpec) -> list[str]:
    """A GPUDirect pool attaches exactly its flavour's extra NICs; a pool without GPUDirect none."""
    networks = pool.additional_node_networks
    flavor = pool.gpudirect_flavor
    if pool.second_network:
        if networks is None or (isinstance(networks, list) and len(networks) != 1):
            given = "missing" if networks is None else f"{len(networks)} given"
            return [
                Problem(
                    "additional_node_networks",
                    f"{given}; second_network: true needs exactly one: G4SecondNetwork's node_networks",
                )
            ]
        return []
    if not pool.stack_networks:
        if networks is not None:
            why = (
                "GKE's DRANET creates the networks of a gpudirect_networking: dranet pool"
                if pool.dranet
                else "only allowed with gpudirect: true (the GPUDirect NICs) or second_network: true"
            )
            return [Problem("additional_node_networks", why)]
        return []
    assert flavor is not None, "the pool rules refuse gpudirect on a machine without a flavour"
    expected = len(FLAVORS[flavor].nics)
    if networks is None:
        return [
            Problem(
                "additional_node_networks",
                f"required with gpudirect: true: the {expected} extra NICs of {pool.machine_type} "
                f"({flavor}), e.g. GpuDirectNetworks' node_networks",
            )
        ]
    if isinstance(networks, list) and len(networks) != expected:
        return [
            Problem(
                "additional_node_networks",
                f"{len(networks)} given; {pool.machine_type} ({flavor}) has {expected} extra NICs, "
                "each needs one (GpuDirectNetworks' node_networks)",
            )
        ]
    return []


class GpuNodePool(GkeGpuComponent[GpuNodePoolSpec]):
    """One GPU node pool: the accelerator, its driver, sharing or MIG, and the GPU taint.

    Always declared by the program itself:

    * the taint ``nvidia.com/gpu=present:NoSchedule``. GKE adds it only when the cluster already has a
      non-GPU pool, so a pool created in parallel could come up untainted and fill with ordinary
      Pods; declaring it also means GKE's own taint never shows up as a diff. Pods that request
      ``nvidia.com/gpu`` get the toleration from GKE's ExtendedResourceToleration admission plugin.
    * COS_CONTAINERD, gVNIC and image streaming; Shielded VMs with secure boot; Workload Identity
      metadata; the node service account ``node_service_account_email`` names (the stack passes the
      cluster's dedicated one; left out, the nodes run as Compute Engine's default account).
    * autoscaling by total node counts with location policy ANY (the zones with capacity first,
      unused reservations first), from ``min_nodes`` (0 by default: the pool costs nothing idle).

    With ``image_cache``, every node also gets a secondary boot disk made from the given image, which
    containerd reads cached container images from (image streaming, always on here, is GKE's
    requirement for it).

    Hazard: most GPU settings are immutable. Changing the accelerator, its count, the driver
    version, sharing, MIG partition, Spot, flex-start, reservation, Local SSDs, placement, the node
    service account or the image cache's disk image deletes and recreates the pool (see
    REPLACE_ON_CHANGE); a new machine type or disk rolls the nodes instead, new zones add or remove
    nodes.
    The pool has a fixed name, so the old pool is deleted before the new one is created (no double
    GPU quota, but no capacity in between): ``pulumi preview`` shows it as a replacement, and the
    offline render's ``--diff`` marks it.
    """

    pool_name: pulumi.Output[str]
    """The GKE node pool's name."""
    machine_type: pulumi.Output[str]
    """The nodes' machine type (derived from the accelerator and GPU count unless given)."""
    zones: pulumi.Output[list[str]]
    """The zones of the nodes."""
    schedulable_gpus_per_node: pulumi.Output[int]
    """`nvidia.com/gpu` each node advertises: GPUs x MIG partitions x sharing clients."""
    workload_policy: compute.ResourcePolicy | None
    """With `workload_policy`: the Compute Engine workload policy the pool is placed by."""

    @classmethod
    def _check(cls, name: str, args: Any) -> tuple[GpuNodePoolSpec, list[str]]:
        """The pool with every default resolved, and the rules' notes."""
        return validate_gpu_node_pool_args(name, args)

    def __init__(
        self,
        name: str,
        /,
        args: GpuNodePoolArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        # Every problem is raised before anything is declared, the component itself included.
        args = self._given(name, args, kwargs)
        pool = self._begin(name, args, opts)

        # initial_node_count is per zone and ForceNew; it only seeds the pool (see ignore_changes).
        initial_per_zone = math.ceil(pool.min_nodes / max(len(pool.zones or []), 1))
        kind = PoolKind(
            flex_start=pool.flex_start,
            queued_provisioning=pool.queued_provisioning,
            bundled_local_ssds=bundles_local_ssds(pool.machine_type),
        )
        self.workload_policy = _workload_policy(name, pool, args["cluster_name"], self)
        self.node_pool = container.NodePool(
            f"{name}-pool",
            name=pool.name,
            project=pool.project,
            location=pool.location,
            cluster=pick(pool.cluster_name, args["cluster_name"]),
            node_locations=list(pool.zones or []),
            initial_node_count=initial_per_zone,
            autoscaling=container.NodePoolAutoscalingArgs(
                total_min_node_count=pool.min_nodes,
                total_max_node_count=pool.max_nodes,
                location_policy="ANY",
            ),
            management=container.NodePoolManagementArgs(
                # Queued-provisioning and flex-start nodes live until their request or run limit
                # ends: GKE's DWS guides create such pools with --no-enable-autorepair. Auto-upgrade
                # stays on (every cluster here is on a release channel, which enforces it).
                auto_repair=not (pool.queued_provisioning or pool.flex_start),
                auto_upgrade=True,
            ),
            # Upgrade one node at a time without a surge node: a surge node needs spare GPU
            # quota and capacity (or reservation room), which GPU pools rarely have. On flex-start and
            # queued-provisioning pools GKE owns the strategy (SHORT_LIVED, which the provider cannot
            # declare): left out and ignored (gpu/gke_rewrites.py), or every preview shows a change.
            upgrade_settings=(
                None if kind.dws else container.NodePoolUpgradeSettingsArgs(max_surge=0, max_unavailable=1)
            ),
            queued_provisioning=(
                container.NodePoolQueuedProvisioningArgs(enabled=True) if pool.queued_provisioning else None
            ),
            placement_policy=(
                # cluster-toolkit's resource-policy module hands gke-node-pool a workload policy as
                # {type: COMPACT, name: <policy>}, which it sets as placement_policy's policy_name.
                container.NodePoolPlacementPolicyArgs(type="COMPACT", policy_name=self.workload_policy.name)
                if self.workload_policy is not None
                else container.NodePoolPlacementPolicyArgs(type="COMPACT")
                if pool.compact_placement
                else None
            ),
            network_config=_network_config(pool, args.get("additional_node_networks")),
            node_config=self._node_config(pool, args.get("node_service_account_email")),
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=["initialNodeCount", *ignored_paths(kind)],
                # The name is fixed, so a replacement must delete the old pool first.
                delete_before_replace=True,
            ),
        )
        self.pool_name = self.node_pool.name
        assert pool.machine_type is not None, "the pool rules resolve the machine type"
        self.machine_type = pulumi.Output.from_input(pool.machine_type)
        self.zones = pulumi.Output.from_input(list(pool.zones or []))
        self.schedulable_gpus_per_node = pulumi.Output.from_input(pool.schedulable_gpus_per_node)
        self.register_outputs(
            {
                "poolName": self.pool_name,
                "machineType": self.machine_type,
                "zones": self.zones,
                "schedulableGpusPerNode": self.schedulable_gpus_per_node,
            }
        )

    @staticmethod
    def _node_config(
        pool: GpuNodePoolSpec, service_account_email: pulumi.Input[str] | None
    ) -> "container.NodePoolNodeConfigArgs":
        sharing = (
            container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
                gpu_sharing_strategy=pool.sharing.strategy,
                max_shared_clients_per_gpu=pool.sharing.max_clients_per_gpu,
            )
            if pool.sharing
            else None
        )
        reservation = container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type=pool.reservation.api_type,
            key="compute.googleapis.com/reservation-name" if pool.reservation.name else None,
            values=[pool.reservation.name] if pool.reservation.name else None,
        )
        kind = PoolKind(flex_start=pool.flex_start, queued_provisioning=pool.queued_provisioning)
        labels = {**pool.labels, **declared_labels(kind), **pool.dra_node_labels}
        hardened = hardened_node_settings(service_account_email)
        if pool.numa_aligned:
            hardened["kubelet_config"] = numa_aligned_kubelet_config()
        if pool.dranet:
            # GKE runs its networking-dra-driver on nodes with this label (cluster-toolkit v1.95.0
            # gke-node-pool main.tf sets it with the accelerator network profile).
            labels[DRANET_NODE_LABEL] = "true"
        bare_metal = bare_metal_node_settings(pool)
        labels.update(bare_metal.labels)
        return container.NodePoolNodeConfigArgs(
            machine_type=pool.machine_type,
            image_type="COS_CONTAINERD",
            disk_size_gb=pool.disk_size_gb,
            disk_type=pool.disk_type,
            spot=pool.spot,
            flex_start=True if pool.flex_start else None,
            max_run_duration=f"{pool.max_run_seconds}s" if pool.max_run_seconds else None,
            guest_accelerators=[
                container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=pool.accelerator,
                    count=pool.gpus_per_node,
                    gpu_driver_installation_config=container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version=pool.driver_version
                    ),
                    gpu_partition_size=pool.mig_partition_size,
                    gpu_sharing_config=sharing,
                )
            ],
            reservation_affinity=reservation,
            ephemeral_storage_local_ssd_config=(
                container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                    local_ssd_count=pool.local_ssd_count
                )
                if pool.local_ssd_count
                else None
            ),
            # Image streaming, on in every pool: GKE requires it for the image cache's secondary boot
            # disk, so it must never depend on other settings.
            gcfs_config=container.NodePoolNodeConfigGcfsConfigArgs(enabled=True),
            # Hazard: changing the disk image replaces the pool (REPLACE_ON_CHANGE).
            secondary_boot_disks=(
                [
                    container.NodePoolNodeConfigSecondaryBootDiskArgs(
                        disk_image=pool.image_cache.disk_image, mode=CONTAINER_IMAGE_CACHE
                    )
                ]
                if pool.image_cache
                else None
            ),
            gvnic=container.NodePoolNodeConfigGvnicArgs(enabled=True),
            labels=labels,
            linux_node_config=bare_metal.linux_node_config,
            **hardened,
            taints=[
                container.NodePoolNodeConfigTaintArgs(key=t.key, value=t.value, effect=t.effect)
                for t in pool.all_taints
            ],
        )


def numa_aligned_kubelet_config() -> container.NodePoolNodeConfigKubeletConfigArgs:
    """The kubelet of a NUMA-aligned pool, as cluster-toolkit's gke-node-pool sets it with
    enable_numa_aware_scheduling (used by examples/gke-g4): CPU manager static, topology manager
    restricted, memory manager Static; the read-only port stays off as on every pool."""
    return container.NodePoolNodeConfigKubeletConfigArgs(
        insecure_kubelet_readonly_port_enabled=READ_ONLY_PORT_OFF,
        cpu_manager_policy="static",
        topology_manager=container.NodePoolNodeConfigKubeletConfigTopologyManagerArgs(policy="restricted"),
        memory_manager=container.NodePoolNodeConfigKubeletConfigMemoryManagerArgs(policy="Static"),
    )


def workload_policy_name(cluster_name: str, pool_name: str) -> str:
    """The workload policy's name: the pool's, and a digest of the cluster's, since resource policies
    are named per project and region (two clusters' pools of one name must not share a policy)."""
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:8]
    return f"{pool_name}-{digest}"


def _workload_policy(
    name: str, pool: GpuNodePoolSpec, cluster_name: pulumi.Input[str], parent: pulumi.Resource
) -> compute.ResourcePolicy | None:
    """The pool's Compute Engine workload policy (HIGH_THROUGHPUT, the rack's accelerator topology),
    regional like every resource policy. Hazard: GKE and Compute Engine cannot change a policy a pool
    uses; a new one comes only with a new pool (placementPolicy replaces the pool)."""
    if not pool.workload_policy:
        return None
    accelerator = load_catalog().accelerator(pool.accelerator)
    domain = accelerator.nvlink_domain if accelerator else None
    assert domain is not None, "the pool rules allow a workload policy on NVL72 racks only"
    zone = ZONE_PATTERN.fullmatch(pool.location)
    return compute.ResourcePolicy(
        f"{name}-workload-policy",
        name=pulumi.Output.from_input(cluster_name).apply(
            lambda cluster: workload_policy_name(cluster, pool.name)
        ),
        project=pool.project,
        region=zone.group(1) if zone else pool.location,
        description=f"gke-gpu: places node pool {pool.name}'s VMs in one NVLink domain",
        workload_policy=compute.ResourcePolicyWorkloadPolicyArgs(
            type="HIGH_THROUGHPUT", accelerator_topology=domain.accelerator_topology
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _network_config(
    pool: GpuNodePoolSpec, networks: "pulumi.Input[list[NodeNetwork]] | None"
) -> "container.NodePoolNetworkConfigArgs | None":
    """Multi-networking, DRANET on A4X Max and G4's second network: the extra NICs' VPCs and subnets
    this program creates; DRANET elsewhere: GKE's accelerator network profile `auto`, with which GKE
    creates them itself."""
    if pool.stack_networks or pool.second_network:
        return container.NodePoolNetworkConfigArgs(
            additional_node_network_configs=cast(_NodeNetworkConfigs, node_network_list(networks))
        )
    if pool.dranet:
        return container.NodePoolNetworkConfigArgs(accelerator_network_profile=DRANET_NETWORK_PROFILE)
    return None


def validate_gpu_node_pool_args(name: str, args: GpuNodePoolArgs) -> tuple[GpuNodePoolSpec, list[str]]:
    """GpuNodePool's boundary check: the pool with every default resolved, and its notes; raises
    InvalidArgsError naming every bad arg."""
    pool, notes = validate_pool_args(
        "GpuNodePool", name, GpuNodePoolSpec, args, check_gpu_node_pool, GpuNodePoolArgs
    )
    assert isinstance(pool, GpuNodePoolSpec) and pool.machine_type and pool.max_nodes is not None
    return pool, notes


def node_pool_args(
    pool: GpuPool,
    *,
    project: str,
    location: str,
    cluster_name: pulumi.Input[str],
    node_service_account_email: pulumi.Input[str] | None = None,
    additional_node_networks: pulumi.Input[list[NodeNetwork]] | None = None,
) -> GpuNodePoolArgs:
    """GpuNodePool's args for a pool of a stack file, checked and resolved by the stack's run of the
    same pool rules."""
    placement: dict[str, object] = {"project": project, "location": location, "cluster_name": cluster_name}
    if node_service_account_email is not None:
        placement["node_service_account_email"] = node_service_account_email
    if additional_node_networks is not None:
        placement["additional_node_networks"] = additional_node_networks
    args = {**pool.model_dump(exclude_none=True, exclude={"on_demand_fallback"}), **placement}
    # The pool was checked and resolved by the pool rules on the stack file's entry: the component does
    # not run them again (CheckedArgs). The spec takes the placement as it is, Outputs included.
    return CheckedArgs(args, pool.as_spec(GpuNodePoolSpec, **placement))  # type: ignore[return-value]
