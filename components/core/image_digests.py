"""Images pinned by digest: the stack's `gke-gpu:images.digests` and the components' `image_digests`.

A digest is what the registry computed over the image's manifest (`sha256:` and 64 lowercase hex, the
OCI image spec's registered algorithm and encoding), so a pinned image is the bytes it was when the
digest was recorded, whoever later pushes its tag. The program cannot reach a registry to resolve one:
the digests are the stack's to record (`crane digest <image>:<tag>`), and the tag stays in the reference
(`<name>:<tag>@sha256:...`, the form the container runtimes pull by digest and show the tag of).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated

from pydantic import Field

from .common import Problems, cut, listing
from .model import StackModel, example

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
ALLOWED_DIGEST = "'sha256:' and 64 lowercase hex digits (as `crane digest <image>:<tag>` prints it)"
MAX_DIGESTS = 32
ImageName = Annotated[str, Field(min_length=1, max_length=255)]
DigestText = Annotated[str, Field(max_length=200)]
ImageDigests = Annotated[dict[ImageName, DigestText], Field(max_length=MAX_DIGESTS)]


class ImagesConfig(StackModel):
    """The stack file's `gke-gpu:images`."""

    model_config = example(digests={"ubuntu": "sha256:" + "0" * 64})

    digests: ImageDigests = Field(default_factory=dict)


def repository(image: str) -> str:
    """An image reference without its tag or digest (`ubuntu:24.04` -> `ubuntu`)."""
    return re.sub(r":[^/:@]+$", "", image.split("@", 1)[0])


def pinned(image: str, digests: Mapping[str, str]) -> str:
    """`image` (`<name>:<tag>`) with its recorded digest appended, or as it is when none is recorded."""
    digest = digests.get(repository(image))
    return f"{image}@{digest}" if digest and "@" not in image else image


def check_digests(
    key: str, digests: Mapping[str, str], images: Iterable[str] | None, problems: Problems
) -> None:
    """One problem per digest that is not `sha256:<64 hex>` and per name that is none of `images` (the
    references this renders; None: not known, names unchecked), each under `<key>.<name>`."""
    names = None if images is None else sorted({repository(image) for image in images})
    for name, digest in digests.items():
        path = f"{key}.{name if len(name) <= 120 and name.isprintable() else cut(name, 60)}"
        if names is not None and name not in names:
            allowed = (
                f"the images it renders: {listing(names)}" if names else "none: it renders no such image"
            )
            problems.add(
                path,
                f"{cut(name, 100)} is not an image this runs privileged or as root by tag; "
                f"allowed: {allowed}",
            )
        elif not DIGEST.fullmatch(digest):
            problems.add(path, f"{cut(digest, 40)} is not a digest; allowed: {ALLOWED_DIGEST}")


def digests_for(digests: Mapping[str, str], images: Iterable[str]) -> dict[str, str]:
    """The digests of `images` only (what one component renders)."""
    names = {repository(image) for image in images}
    return {name: digest for name, digest in digests.items() if name in names}
