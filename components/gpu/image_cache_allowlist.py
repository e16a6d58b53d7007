"""The cluster's allowlist of the disk images GKE may attach as secondary boot disks to node pools it
creates itself: a capacity ladder's ComputeClass with an image cache needs its image listed here."""

from collections import Counter
from typing import Annotated, Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.common import Problem
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels
from ..core.model import DISK_IMAGE
from ..core.validation import ArgsModel

ALLOWLIST_API_VERSION = "node.gke.io/v1"
# The one name every published example gives it (UNVERIFIED that GKE reads no other name): one
# object per cluster, so the stack declares one for all its pools.
ALLOWLIST_NAME = "gke-secondary-boot-disk-allowlist"
MAX_IMAGES = 100


class ImageCacheAllowlistArgs(TypedDict):
    """The disk images GKE may attach to the node pools it creates."""

    disk_images: list[str]
    """Each `projects/<project>/global/images/<name>`, once."""


class _ImageCacheAllowlistSpec(ArgsModel):
    disk_images: Annotated[
        list[Annotated[str, Field(max_length=200, pattern=DISK_IMAGE)]],
        Field(min_length=1, max_length=MAX_IMAGES),
    ]


def _allowlist_rules(spec: _ImageCacheAllowlistSpec) -> list[str]:
    counts = Counter(spec.disk_images)
    return [
        Problem("disk_images", f"lists {image!r} {n} times") for image, n in sorted(counts.items()) if n > 1
    ]


class ImageCacheAllowlist(GkeGpuComponent[_ImageCacheAllowlistSpec]):
    """A GCPResourceAllowlist (node.gke.io/v1) named `gke-secondary-boot-disk-allowlist` that lists
    the exact paths of the disk images (no wildcard: no other image of those projects is allowed).

    GKE attaches a secondary boot disk to the node pools a ComputeClass makes it create only for an
    image that an allowlist names (GKE's secondary boot disk guide for Autopilot and node
    auto-provisioning; for a Standard cluster's ComputeClass UNVERIFIED beyond third-party guides).
    Node pools this program declares itself (GpuNodePool) need no allowlist. The object is
    cluster-wide and one of a kind: declare one per cluster, with every pool's image.
    """

    allowed_images: pulumi.Output[list[str]]
    """The disk images the allowlist names."""

    _args_model = _ImageCacheAllowlistSpec
    _args_rules = staticmethod(_allowlist_rules)

    def __init__(
        self,
        name: str,
        /,
        args: ImageCacheAllowlistArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        self.allowlist = k8s.apiextensions.CustomResource(
            f"{name}-allowlist",
            api_version=ALLOWLIST_API_VERSION,
            kind="GCPResourceAllowlist",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=ALLOWLIST_NAME, labels=app_labels(ALLOWLIST_NAME, component="image-cache-allowlist")
            ),
            spec={"allowedResourcePatterns": list(spec.disk_images)},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.allowed_images = pulumi.Output.from_input(list(spec.disk_images))
        self.register_outputs({"allowedImages": self.allowed_images})
