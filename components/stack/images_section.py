"""`gke-gpu:images`: each digest pins an image that this stack renders privileged or as root on its
nodes by tag, and is a digest. Here, not in a domain: the images are every domain's (GPUDirect's node
software, the DCGM exporter, the device plugin, the DRA driver), the rule core's. Nothing is declared."""

from __future__ import annotations

from ..core import images
from ..core.common import NAMESPACE
from ..core.image_digests import check_digests, repository
from ..core.section import SectionContext
from ..gpu.pool import GpuPool
from ..monitoring.model import MonitoringConfig
from .stack_model import StackConfig

DIGESTS_KEY = f"{NAMESPACE}:images.digests"


def pinnable_images(
    pools: tuple[GpuPool, ...], monitoring: MonitoringConfig, device_plugin: bool
) -> list[str]:
    """The images this stack runs privileged or as root on its nodes, pinned by tag: GPUDirect's node
    software for each flavour of its pools, and the DCGM exporter and NVIDIA's device plugin where it
    runs them."""
    # Here, not at import: gpudirect/images.py reads a path from core/k8s.py, which imports the
    # Kubernetes SDK, and reading a stack's config imports no cloud SDK (tests/test_package_exports.py).
    from ..gpudirect.images import NODE_IMAGES_BY_TAG

    found: list[str] = []
    for pool in pools:
        if pool.gpudirect_flavor is not None:
            found += NODE_IMAGES_BY_TAG[pool.gpudirect_flavor]
    if monitoring.dcgm == "exporter":
        found.append(images.DCGM_EXPORTER)
    if device_plugin:
        found.append(images.DEVICE_PLUGIN)
    return list(dict.fromkeys(found))


def privileged_images_by_tag(
    pools: tuple[GpuPool, ...],
    monitoring: MonitoringConfig,
    device_plugin: bool,
    digests: dict[str, str],
    dra_driver: bool,
) -> list[str]:
    """What the render lists (stack output `privilegedImagesByTag`): the images this stack runs
    privileged or as root on its nodes that no digest pins, neither upstream's published one
    (gpudirect/images.py PUBLISHED_DIGESTS) nor the stack's `images.digests`; and the DRA driver's
    (its chart takes a tag: no digest could be recorded for it) and GKE's preloaded driver installer
    on DRA-GPU pools (never pulled: Google's manifest names it by tag alone)."""
    from ..gpudirect.images import published_digests

    pinned = {**published_digests(), **digests}
    found = [i for i in pinnable_images(pools, monitoring, device_plugin) if repository(i) not in pinned]
    if dra_driver:
        from ..dra.driver import DRA_DRIVER_IMAGE, DRA_DRIVER_IMAGE_TAG

        found.append(f"{DRA_DRIVER_IMAGE}:{DRA_DRIVER_IMAGE_TAG}")
    if any(pool.dra_gpus for pool in pools):
        from ..dra.driver_installer import INSTALLER_IMAGE

        found.append(INSTALLER_IMAGE)
    return sorted(dict.fromkeys(found))


def check_image_digests(
    config: StackConfig,
    pools: tuple[GpuPool, ...],
    monitoring: MonitoringConfig,
    device_plugin: bool,
    ctx: SectionContext,
) -> dict[str, str]:
    """`gke-gpu:images.digests`: each name an image the stack renders privileged or as root by tag
    (core/image_digests.py's rule over what the sections resolved: `pools`, `monitoring`, whether the
    device plugin runs), judged once the sections it reads passed their own checks."""
    digests = dict(config.images.digests)
    if not digests:
        return {}
    if ctx.broken.any_pool() or {"gpuPools", "monitoring", "devicePlugin"} & ctx.broken.sections:
        # What the stack renders is not known: the names are checked once those sections pass.
        rendered = None
    elif config.fleet is not None:
        # A fleet's workers run them too: stack/fleet_section.py checks the names against the
        # manager's images and every worker's.
        rendered = None
    else:
        rendered = pinnable_images(pools, monitoring, device_plugin)
    check_digests(DIGESTS_KEY, digests, rendered, ctx.problems)
    return digests
