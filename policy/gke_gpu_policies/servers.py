"""What a model server is, for the serving rules (`serving`).

A Deployment, StatefulSet or LeaderWorkerSet (its leader and worker templates, each judged on its own)
whose Pods either carry `app.kubernetes.io/component: inference-server` (on the object or the Pod
template: what `InferenceService` sets) or run a known model-server image in one of their containers
(`SERVER_REPOSITORIES`). Init containers, Jobs and bare Pods are not servers: a benchmark client or a
weights download runs the same images there. A template whose labels or images are not known yet, and
that may or may not be a server's, is not judged.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .constants import COMPONENT_LABEL, SERVER_COMPONENT
from .props import UNKNOWN, get, items
from .shared import LEADER_WORKER_SET, LWS_TEMPLATES, container_label, group_kind, workload_subject

# Model-server images, as the repository path after the registry host. A mirror that keeps that path
# under a prefix of its own (an Artifact Registry remote repository, a pull-through cache) matches too:
# `us-docker.pkg.dev/acme/dockerhub/vllm/vllm-openai`. Where each name comes from: policy/README.md.
SERVER_REPOSITORIES = (
    "vllm/vllm-openai",  # vLLM's CUDA image on Docker Hub
    "nvidia/vllm",  # NVIDIA's vLLM build, nvcr.io
    "lmsysorg/sglang",  # SGLang, Docker Hub
    "huggingface/text-generation-inference",  # Hugging Face TGI, ghcr.io
    "nvidia/tritonserver",  # NVIDIA Triton, nvcr.io (its `-sdk` tags are the client tools, not servers)
    "vertex-ai/vertex-vision-model-garden-dockers/pytorch-vllm-serve",  # Vertex Model Garden's vLLM
)
# Google's Deep Learning Container for TGI puts the CUDA and TGI versions in the repository name
# (`.../huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311`).
SERVER_REPOSITORY_PREFIXES = (
    "deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu",
)

_TEMPLATE = (("", ("spec", "template")),)
# (API group, kind) -> (where, path to the Pod template) for each template; the claims' path.
_TEMPLATES: dict[tuple[str, str], tuple[tuple[str, tuple[str, ...]], ...]] = {
    ("apps", "Deployment"): _TEMPLATE,
    ("apps", "StatefulSet"): _TEMPLATE,
    LEADER_WORKER_SET: LWS_TEMPLATES,
}
_CLAIMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "StatefulSet"): ("spec", "volumeClaimTemplates"),
    LEADER_WORKER_SET: ("spec", "leaderWorkerTemplate", "volumeClaimTemplates"),
}


def is_server_image(image: str) -> bool:
    """Whether a container image reference names a known model-server image."""
    name = image.strip().split("@", 1)[0].lower()
    tag = ""
    if name.rfind(":") > name.rfind("/"):
        name, tag = name.rsplit(":", 1)
    if tag.endswith("-sdk"):
        return False
    return any(name == r or name.endswith(f"/{r}") for r in SERVER_REPOSITORIES) or any(
        name.startswith(p) or f"/{p}" in name for p in SERVER_REPOSITORY_PREFIXES
    )


class ServerPod(NamedTuple):
    """One Pod template of a model server."""

    subject: str  # `Deployment 'serve-chat-deployment' (serve-chat/chat)`, `..., leader template`
    pod: Any  # the Pod spec
    # (label, container) of the containers that run a known server image; [] when only the label says
    # it is a server; UNKNOWN when the containers are not known yet.
    servers: Any
    # Names of the workload's volumeClaimTemplates (PVCs that take precedence over a volume of the
    # same name), or UNKNOWN.
    claims: Any = frozenset()


def _labelled(*values: Any) -> Any:
    if SERVER_COMPONENT in values:
        return True
    return UNKNOWN if any(v is UNKNOWN for v in values) else False


def _claim_names(props: Any, key: tuple[str, str]) -> Any:
    path = _CLAIMS.get(key)
    claims = items(get(props, *path)) if path else None
    if claims is UNKNOWN:
        return UNKNOWN
    names = [get(claim, "metadata", "name") for claim in claims or []]
    if any(not isinstance(n, str) for n in names):
        return UNKNOWN
    return frozenset(names)


def server_pods(resource_type: str, name: str, props: Any) -> list[ServerPod]:
    """The Pod templates of a workload that runs a model server ([] for anything else, and for a
    template whose labels or images are not known yet and may or may not be a server's)."""
    key = group_kind(resource_type) or ("", "")
    templates = _TEMPLATES.get(key)
    if templates is None:
        return []
    object_label = get(props, "metadata", "labels", COMPONENT_LABEL)
    result = []
    for part, path in templates:
        template = get(props, *path)
        pod = get(template, "spec")
        if pod is None or pod is UNKNOWN:
            continue  # no leaderTemplate, or a template not known yet
        labelled = _labelled(object_label, get(template, "metadata", "labels", COMPONENT_LABEL))
        containers = items(get(pod, "containers"))
        servers: Any = UNKNOWN
        if containers is not UNKNOWN:
            servers = [
                (container_label("containers", index, container), container)
                for index, container in enumerate(containers or [])
                if isinstance(image := get(container, "image"), str) and is_server_image(image)
            ]
        # Neither labelled nor running a known image (or not known yet): not judged.
        if labelled is True or (servers is not UNKNOWN and servers):
            subject = workload_subject(resource_type, name, props, part)
            result.append(ServerPod(subject, pod, servers, _claim_names(props, key)))
    return result
