"""Node settings of A4X Max (GB300, `a4x-maxgpu-4g-metal`, bare metal) GPUDirect pools, as
cluster-toolkit's blueprint sets them.

Source: GoogleCloudPlatform/cluster-toolkit @1047080375af (2026-06-25)
examples/gke-a4x-max-bm/gke-a4x-max-bm.yaml, the `a4x-max-pool` module:
`linux_node_config.hugepages_config.hugepage_size_2m: 4096` and the Kubernetes labels
`cloud.google.com/gke-networking-dra-driver: "true"` (declared for every DRANET pool, node_pool.py) and
`cloud.google.com/gke-dpv2-unified-cni: "cni-migration"`; its `asapd-lite-installer.yaml` DaemonSet
takes `hugepages-2Mi: 8192Mi`, all 4096 pages of 2 MiB. What the second label switches on is not
documented on any page read (UNVERIFIED): it is declared because Google's blueprint declares it.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from pulumi_gcp import container

from ..gpudirect.flavors import GpuDirectFlavor
from .pool import GpuPool

# 2 MiB huge pages per node (cluster-toolkit's value; ASAPD-lite requests all of them).
HUGEPAGES_2M = 4096
UNIFIED_CNI_LABEL = "cloud.google.com/gke-dpv2-unified-cni"
UNIFIED_CNI_VALUE = "cni-migration"


class BareMetalNodeSettings(NamedTuple):
    labels: Mapping[str, str] = MappingProxyType({})
    linux_node_config: container.NodePoolNodeConfigLinuxNodeConfigArgs | None = None


def is_bare_metal(machine_type: str | None) -> bool:
    """A bare-metal machine type: Compute Engine names them `...-metal` ("Bare metal instances")."""
    return bool(machine_type) and str(machine_type).endswith("-metal")


def bare_metal_node_settings(pool: GpuPool) -> BareMetalNodeSettings:
    """The labels and Linux settings an A4X Max GPUDirect pool's nodes get; nothing for other pools."""
    if pool.gpudirect_flavor is not GpuDirectFlavor.RDMA_A4X_MAX:
        return BareMetalNodeSettings()
    return BareMetalNodeSettings(
        labels={UNIFIED_CNI_LABEL: UNIFIED_CNI_VALUE},
        linux_node_config=container.NodePoolNodeConfigLinuxNodeConfigArgs(
            hugepages_config=container.NodePoolNodeConfigLinuxNodeConfigHugepagesConfigArgs(
                hugepage_size2m=HUGEPAGES_2M
            )
        ),
    )
