"""Pass 2 rule for `gke-gpu:images`: each digest pins an image that this stack renders privileged or as
root on its nodes by tag, and is a digest. Nothing is declared here."""

from __future__ import annotations

from ..core import images
from ..core.common import NAMESPACE
from ..core.image_digests import digest_problems, repository
from ..gpu.pool import GpuPool
from ..monitoring.model import MonitoringConfig
from .schema import RuleBase

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
    from ..dra.driver import DRA_DRIVER_IMAGE, DRA_DRIVER_IMAGE_TAG
    from ..dra.driver_installer import INSTALLER_IMAGE
    from ..gpudirect.images import published_digests

    pinned = {**published_digests(), **digests}
    found = [i for i in pinnable_images(pools, monitoring, device_plugin) if repository(i) not in pinned]
    if dra_driver:
        found.append(f"{DRA_DRIVER_IMAGE}:{DRA_DRIVER_IMAGE_TAG}")
    if any(pool.dra_gpus for pool in pools):
        found.append(INSTALLER_IMAGE)
    return sorted(dict.fromkeys(found))


class ImageRules(RuleBase):
    def _image_digests(
        self, pools: tuple[GpuPool, ...], monitoring: MonitoringConfig, device_plugin: bool
    ) -> dict[str, str]:
        digests = dict(self.config.images.digests)
        if not digests:
            return {}
        if self.broken.any_pool() or {"gpuPools", "monitoring", "devicePlugin"} & self.broken.sections:
            # What the stack renders is not known: the names are checked once those sections pass.
            rendered = None
        elif self.config.fleet is not None:
            # A fleet's workers run them too: stack/fleet_section.py checks the names against the
            # manager's images and every worker's.
            rendered = None
        else:
            rendered = pinnable_images(pools, monitoring, device_plugin)
        for problem in digest_problems(DIGESTS_KEY, digests, rendered):
            self.problems.add(problem.path, problem.reason)
        return digests
