"""GPUDirect's node side as Google ships it: the pinned images of each flavour's NCCL plugin installer and
per-Pod receive daemon (RxDM), and the host paths the installers write. One place for the facts both
sides use: the node software (software.py) installs them and the Pod parts (pod_parts.py) and the
all-reduce mount and run them.

Source: GoogleCloudPlatform/container-engine-accelerators at commit
992db81257553607f1477945f1b3219632991829 (2026-06-11), files named per line.
"""

from typing import NamedTuple

from ..core.image_digests import repository
from ..core.k8s import GKE_DRIVER_HOST_DIR

# -- Pinned images (container-engine-accelerators@992db812, files named per line) -----------------
# Version coupling: the RxDM ("tcpx(o)-daemon") tag must match the NCCL plugin tag the installer put
# on the node (gpudirect-tcpxo/README.md: "The tcpxo-daemon version is coupled with the NCCL plugin
# installer version"), and all Pods of one job must see the same plugin: TCPX v3.1.9 <-> RxDM
# v2.0.12, TCPXO v1.0.15 <-> RxDM v1.0.21 (release of 2026-01-09). Bump each pair together.
# gpudirect-tcpx/nccl-tcpx-installer.yaml
TCPX_PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9"
# gpudirect-tcpx/nccl-test-latest.yaml (container tcpx-daemon)
TCPX_RXDM = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12"
# gpudirect-tcpxo/nccl-tcpxo-installer.yaml
TCPXO_PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"
# gpudirect-tcpxo/nccl-test-latest.yaml (container tcpxo-daemon), gpudirect-tcpxo/README.md
TCPXO_RXDM = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
# gpudirect-rdma/nccl-rdma-installer.yaml (gIB: no per-Pod daemon)
GIB_PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
# gpudirect-rdma/nccl-rdma-installer-a4x.yaml: gIB's arm64 build for A4X's Grace hosts (its own tag
# line: v1.1.0 at the pinned commit; cluster-toolkit v1.95.0 examples/gke-a4x installs the same).
GIB_PLUGIN_ARM64 = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-arm64:v1.1.0"
# A4X Max's node agent (asapd.py): cluster-toolkit @1047080375af
# examples/gke-a4x-max-bm/asapd-lite-installer.yaml (tag of its commit 42b5dbb09, 2026-06-07).
ASAPD_LITE = "us-docker.pkg.dev/gce-ai-infra/asapd-lite/asapd-lite:v0.0.8"
# nri_device_injector/nri-device-injector.yaml (pinned by digest there)
NRI_DEVICE_INJECTOR = (
    "gcr.io/gke-release/nri-device-injector"
    "@sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970"
)
# Every installer's long-running container (the installers are init containers), as in all three.
PAUSE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
# TCPXO's pre-installation step only needs `nsenter` from its image: everything after it runs in the
# host's namespaces. Google's manifest says plain "ubuntu"; NVIDIA's copy of it pins the LTS tag by
# digest (PUBLISHED_DIGESTS).
TCPXO_PRE_INSTALL = "ubuntu:24.04"
# The images each flavour's node software (software.py INSTALLERS) names by tag, which `image_digests`
# may pin (a stack's digest over the one PUBLISHED_DIGESTS has): the NRI device injector and pause carry
# Google's digests in the reference already.
NODE_IMAGES_BY_TAG = {
    "TCPX": (TCPX_PLUGIN,),
    "TCPXO": (TCPXO_PLUGIN, TCPXO_PRE_INSTALL),
    "RDMA": (GIB_PLUGIN,),
    "RDMA-A4X": (GIB_PLUGIN_ARM64,),
    # A4X Max: ASAPD-lite (asapd.py) only; gIB is in the workload's own image.
    "RDMA-A4X-Max": (ASAPD_LITE,),
}


# -- Digests upstream publishes for these tags ----------------------------------------------------
# Google's manifests name these images by tag; NVIDIA's manifests for GKE (NVIDIA/aicr) pin the same
# tags by digest. Each one is the image's by default (a stack's `images.digests` may replace it); an
# image with none here runs by tag, and the render lists it (stack output `privilegedImagesByTag`).
class PublishedDigest(NamedTuple):
    image: str
    digest: str
    source: str


PUBLISHED_DIGESTS = (
    PublishedDigest(
        TCPXO_PLUGIN,
        "sha256:4c9f0de3f39455a2ea35e844e0fc92564ca5629f6b03250fde40e8160719dae4",
        "NVIDIA/aicr docs/user/container-images.md, the BOM of recipes/components/gke-nccl-tcpxo/manifests/ "
        "(a version after 4288a18c, 2026; the manifest's own commit not read: UNVERIFIED there)",
    ),
    PublishedDigest(
        TCPXO_PRE_INSTALL,
        "sha256:c4a8d5503dfb2a3eb8ab5f807da5bc69a85730fb49b5cfca2330194ebcc41c7b",
        "NVIDIA/aicr@720d7d3c recipes/components/gke-nccl-tcpxo/manifests/nccl-tcpxo-installer.yaml "
        "(init container pre-installation)",
    ),
    PublishedDigest(
        TCPXO_RXDM,
        "sha256:8d9e10fd589a34ab8a0aa64f7e70ad075c8f1c69bea176350f8d211367697e3d",
        "NVIDIA/aicr@3c2108c7 recipes/components/kubeflow-trainer/manifests/"
        "torch-distributed-tcpxo-cluster-training-runtime.yaml (init container tcpxo-daemon)",
    ),
)


def published_digests() -> dict[str, str]:
    """The published digests by image name without its tag (core/image_digests.py's form)."""
    return {repository(p.image): p.digest for p in PUBLISHED_DIGESTS}


# -- Host paths on GKE's COS nodes ----------------------------------------------------------------
# Where GKE installs the NVIDIA driver; the installers add the NCCL plugin (and NCCL) to its lib64.
NVIDIA_HOST_DIR = GKE_DRIVER_HOST_DIR
NVIDIA_LIB64_HOST = f"{NVIDIA_HOST_DIR}/lib64"
# gIB (RDMA): its libraries, configs and scripts/set_nccl_env.sh.
GIB_HOST_DIR = "/home/kubernetes/bin/gib"
# TCPXO: the "aperture" PCI devices the pre-installation step bind-mounts for the LLCM path.
APERTURE_DEVICES = "/dev/aperture_devices"
