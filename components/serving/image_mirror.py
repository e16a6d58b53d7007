"""ImageMirror: an Artifact Registry remote repository that proxies Docker Hub in the cluster's region,
so the model servers' images come from Artifact Registry, where GKE's image streaming applies, and
the nodes read them with a role on that repository alone.

Sources and what is UNVERIFIED: docs/serving-research.md, "Objects (serving-objects)"."""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
from pulumi_gcp import artifactregistry
from pydantic import Field

from ..core.arg_types import ProjectId, matching
from ..core.common import REGION_PATTERN
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.validation import ArgsModel, Deferrable
from .image_source import DEFAULT_REPOSITORY, REPOSITORY_ID, registry_path

READER_ROLE = "roles/artifactregistry.reader"


class ImageMirrorArgs(TypedDict):
    """Where the repository is and who reads it."""

    project: str
    """The GCP project of the repository (the cluster's)."""
    region: str
    """The repository's region: the cluster's, so its nodes stream from their own region."""
    node_service_account_email: pulumi.Input[str]
    """The nodes' service account (GkeCluster's `node_service_account_email`): it alone gets
    `roles/artifactregistry.reader`, on this repository alone."""
    repository_id: NotRequired[str]
    """The repository's id. Defaults to `docker-hub`."""


class _ImageMirrorSpec(ArgsModel):
    project: ProjectId
    region: matching(REGION_PATTERN, "a GCP region such as us-central1", max_length=40)  # type: ignore[valid-type]
    node_service_account_email: Deferrable[Annotated[str, Field(max_length=254)]]
    repository_id: matching(REPOSITORY_ID, "lowercase letters, digits and hyphens", max_length=63) = (  # type: ignore[valid-type]
        DEFAULT_REPOSITORY
    )


class ImageMirror(GkeGpuComponent[_ImageMirrorSpec]):
    """A Docker-format Artifact Registry repository in `REMOTE_REPOSITORY` mode whose upstream is
    Docker Hub (`public_repository: DOCKER_HUB`): the first pull of an image fetches it from Docker
    Hub and keeps it; later pulls, and image streaming, read Artifact Registry. The nodes' service
    account reads it (`roles/artifactregistry.reader` on the repository, not the project). Not
    managed: Docker Hub credentials (anonymous pulls are rate-limited by Docker Hub; the repository
    pulls each layer once), cleanup policies, and images outside Docker Hub."""

    registry: pulumi.Output[str]
    """The repository's Docker path, `<region>-docker.pkg.dev/<project>/<repository_id>`: an image
    `owner/name:tag` of Docker Hub is `<registry>/owner/name:tag` (an official one `library/name:tag`)."""

    _args_model = _ImageMirrorSpec
    _args_type = ImageMirrorArgs

    def __init__(
        self,
        name: str,
        /,
        args: ImageMirrorArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        repository = artifactregistry.Repository(
            f"{name}-repository",
            project=spec.project,
            location=spec.region,
            repository_id=spec.repository_id,
            format="DOCKER",
            mode="REMOTE_REPOSITORY",
            description="Docker Hub, proxied for the model servers' images (gke-gpu)",
            remote_repository_config=artifactregistry.RepositoryRemoteRepositoryConfigArgs(
                description="Docker Hub",
                docker_repository=artifactregistry.RepositoryRemoteRepositoryConfigDockerRepositoryArgs(
                    public_repository="DOCKER_HUB"
                ),
            ),
            labels={"managed-by": "pulumi", "part-of": "gke-gpu"},
            opts=child,
        )
        account = spec.node_service_account_email
        artifactregistry.RepositoryIamMember(
            f"{name}-node-reader",
            project=spec.project,
            location=spec.region,
            repository=repository.repository_id,
            role=READER_ROLE,
            member=pulumi.Output.from_input(account).apply(lambda email: f"serviceAccount:{email}"),
            opts=child,
        )
        self.registry = pulumi.Output.from_input(registry_path(spec.region, spec.project, spec.repository_id))
        self.register_outputs({"registry": self.registry})
