"""Where a model server's image comes from and how it reaches a new node: plain data, for the stack
layer and ImageMirror (which declares the mirror). Sources and what is UNVERIFIED:
docs/serving-research.md, "Objects (serving-objects)"."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..gpu.pool import ImageCacheConfig

DEFAULT_REPOSITORY = "docker-hub"
# A repository id: lowercase letters, digits and hyphens, starting with a letter (Artifact Registry).
REPOSITORY_ID = r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$"


def mirrored(registry: str, image: str) -> str:
    """`image` (a Docker Hub reference, `owner/name:tag`, or an official image `name:tag`) as the
    remote repository `registry` serves it: Docker Hub's official images live under `library/`."""
    path = image.removeprefix("docker.io/")
    if "/" not in path.split(":", 1)[0]:
        path = f"library/{path}"
    return f"{registry}/{path}"


def registry_path(region: str, project: str, repository: str) -> str:
    """The Docker host and path of a repository in `region`: `<region>-docker.pkg.dev/<project>/<id>`."""
    return f"{region}-docker.pkg.dev/{project}/{repository}"


def describe_image(image: str, registry: str, image_cache: ImageCacheConfig | None) -> str:
    """The render's words for how `image` reaches a new node of the pool, and no more than that."""
    if registry:
        source = (
            f"{image}: from Artifact Registry (remote repository {registry}, a Docker Hub proxy in the "
            "cluster's region, read by the nodes' account; the first pull of a tag fills it from Docker "
            "Hub); streamed by GKE's image streaming (on in every pool), which applies to Artifact "
            "Registry images (that it applies to a remote repository's is UNVERIFIED on GKE's own page)"
        )
    else:
        source = (
            f"{image}: pulled whole from Docker Hub at a node's first start (image streaming applies "
            "only to Artifact Registry images)"
        )
    if image_cache is None:
        return source
    return (
        f"preloaded from the pool's secondary boot disk {image_cache.disk_image} if that disk image was "
        f"built with it (gpuPools[].imageCache); otherwise {source}"
    )
