"""A GKE Standard node pool of NVIDIA GPUs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
from pulumi_gcp import container

from .cluster import hardened_node_settings
from .config import GpuPool
from .package import component_options, component_type

# Inputs whose change makes GKE delete and recreate the node pool (ForceNew in the provider),
# keyed by their camelCase path in the NodePool's inputs. The offline render marks them, and
# `tools/render.py --diff` turns a change to any of them into "REPLACE".
# (terraform-provider-google node_config.go / resource_container_node_pool.go, which pulumi-gcp
# bridges.) Machine type, disk size and type, image type, labels and taints are updated in place:
# GKE recreates the nodes one by one but keeps the pool.
REPLACE_ON_CHANGE = (
    "name",
    "location",
    "nodeLocations",
    "placementPolicy",
    "queuedProvisioning",
    "nodeConfig.guestAccelerators",
    "nodeConfig.spot",
    "nodeConfig.reservationAffinity",
    "nodeConfig.ephemeralStorageLocalSsdConfig",
    "nodeConfig.serviceAccount",
    "nodeConfig.oauthScopes",
    "nodeConfig.metadata",
    "nodeConfig.shieldedInstanceConfig",
    "nodeConfig.gvnic",
    "nodeConfig.gcfsConfig",
)


@dataclass(frozen=True, kw_only=True)
class GpuNodePoolArgs:
    project: str
    # Cluster location: the region, or a zone for a zonal cluster.
    location: str
    cluster_name: pulumi.Input[str]
    service_account_email: pulumi.Input[str]
    pool: GpuPool


class GpuNodePool(pulumi.ComponentResource):
    """One GPU node pool: the accelerator, its driver, sharing or MIG, and the GPU taint.

    Always declared by the program itself:

    * the taint ``nvidia.com/gpu=present:NoSchedule``. GKE adds it only when the cluster already has a
      non-GPU pool, so a pool created in parallel could come up untainted and fill with ordinary
      Pods; declaring it also means GKE's own taint never shows up as a diff. Pods that request
      ``nvidia.com/gpu`` get the toleration from GKE's ExtendedResourceToleration admission plugin.
    * COS_CONTAINERD, gVNIC and image streaming; Shielded VMs with secure boot; Workload Identity
      metadata; the cluster's dedicated node service account.
    * autoscaling by total node counts with location policy ANY (the zones with capacity first,
      unused reservations first), from ``min_nodes`` (0 by default: the pool costs nothing idle).

    Hazard: most GPU settings are immutable. Changing the accelerator, its count, the driver
    version, sharing, MIG partition, Spot, reservation, Local SSDs, placement or zones deletes and
    recreates the pool (see REPLACE_ON_CHANGE); a new machine type or disk rolls the nodes instead.
    The pool has a fixed name, so the old pool is deleted before the new one is created (no double
    GPU quota, but no capacity in between): ``pulumi preview`` shows it as a replacement, and the
    offline render's ``--diff`` marks it.
    """

    node_pool: container.NodePool
    pool_name: pulumi.Output[str]

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(component_type("GpuNodePool"), name, None, component_options("GpuNodePool", opts))
        pool = args.pool
        assert pool.machine_type and pool.max_nodes is not None, "a resolved Standard pool"

        # initial_node_count is per zone and ForceNew; it only seeds the pool (see ignore_changes).
        initial_per_zone = math.ceil(pool.min_nodes / max(len(pool.zones), 1))
        self.node_pool = container.NodePool(
            f"{name}-pool",
            name=pool.name,
            project=args.project,
            location=args.location,
            cluster=args.cluster_name,
            node_locations=list(pool.zones),
            initial_node_count=initial_per_zone,
            autoscaling=container.NodePoolAutoscalingArgs(
                total_min_node_count=pool.min_nodes,
                total_max_node_count=pool.max_nodes,
                location_policy="ANY",
            ),
            management=container.NodePoolManagementArgs(
                # Queued-provisioning nodes live until their ProvisioningRequest ends: GKE's DWS guide
                # creates such pools with --no-enable-autorepair. Auto-upgrade stays on (every
                # cluster here is on a release channel, which enforces it).
                auto_repair=not pool.queued_provisioning,
                auto_upgrade=True,
            ),
            # Upgrade one node at a time without a surge node: a surge node needs spare GPU
            # quota and capacity (or reservation room), which GPU pools rarely have.
            upgrade_settings=container.NodePoolUpgradeSettingsArgs(max_surge=0, max_unavailable=1),
            queued_provisioning=(
                container.NodePoolQueuedProvisioningArgs(enabled=True) if pool.queued_provisioning else None
            ),
            placement_policy=(
                container.NodePoolPlacementPolicyArgs(type="COMPACT") if pool.compact_placement else None
            ),
            node_config=self._node_config(args),
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=["initialNodeCount"],
                # The name is fixed, so a replacement must delete the old pool first.
                delete_before_replace=True,
            ),
        )
        self.pool_name = self.node_pool.name
        self.register_outputs(
            {
                "poolName": self.pool_name,
                "accelerator": pool.accelerator,
                "gpusPerNode": pool.gpus_per_node,
                "zones": list(pool.zones),
            }
        )

    @staticmethod
    def _node_config(args: GpuNodePoolArgs) -> container.NodePoolNodeConfigArgs:
        pool = args.pool
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
        labels = dict(pool.labels)
        if pool.queued_provisioning:
            labels["cloud.google.com/gke-queued"] = "true"
        return container.NodePoolNodeConfigArgs(
            machine_type=pool.machine_type,
            image_type="COS_CONTAINERD",
            disk_size_gb=pool.disk_size_gb,
            disk_type=pool.disk_type,
            spot=pool.spot,
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
            gcfs_config=container.NodePoolNodeConfigGcfsConfigArgs(enabled=True),
            gvnic=container.NodePoolNodeConfigGvnicArgs(enabled=True),
            labels=labels,
            **hardened_node_settings(args.service_account_email),
            taints=[
                container.NodePoolNodeConfigTaintArgs(key=t.key, value=t.value, effect=t.effect)
                for t in pool.all_taints
            ],
        )
