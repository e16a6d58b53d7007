"""`gke-gpu:images.digests`: the images run privileged or as root on the nodes, pinned by digest
(`<name>:<tag>@sha256:...`), checked before anything is declared; the policy pack's
privileged-image-by-digest then passes for them without `acceptedByTag`. The digests here are
synthetic: no stack file records one (none could be resolved from here)."""

from __future__ import annotations

from typing import Any

import pytest

from gke_gpu.core import images
from gke_gpu.core.common import cut
from gke_gpu.gpudirect import images as gpudirect_images
from gke_gpu.gpudirect.software import GpuDirectSoftware
from policy.gke_gpu_policies import security
from policy.tests.factories import stack_args, violations
from tests.conftest import config_error, render, stack_render
from tools.offline import RunResult, load_stack_config, run_program

DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64
TCPXO = gpudirect_images.TCPXO_PLUGIN.rsplit(":", 1)[0]


def _stack(stack: str, digests: dict[str, str] | None) -> dict[str, Any]:
    config: dict[str, Any] = dict(load_stack_config(stack)[0])
    if digests is not None:
        config["gke-gpu:images"] = {"digests": digests}
    return config


def _raw(stack: str, digests: dict[str, str]) -> dict[str, Any]:
    """The stack file's gke-gpu: keys as parse_settings takes them, with `digests`."""
    import json

    raw = {
        k.split(":", 1)[1]: json.loads(v) if v[:1] in "{[" else v
        for k, v in load_stack_config(stack)[0].items()
        if k.startswith("gke-gpu:")
    }
    return {**raw, "images": {"digests": digests}}


def _images(result: RunResult) -> dict[str, str]:
    """Each DaemonSet container's image, by `<daemon set>/<container>`."""
    found = {}
    for ds in result.of_type(DAEMON_SET):
        spec = ds.inputs["spec"]["template"]["spec"]
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            found[f"{ds.inputs['metadata']['name']}/{container['name']}"] = container["image"]
    return found


def _digest_violations(result: RunResult) -> list[str]:
    resources = [(r.type, r.name, r.inputs) for r in result.resources if r.custom]
    return violations(
        security.validate_privileged_image_by_digest,
        stack_args(resources, config={"acceptedByTag": []}),
    )


def test_the_tcpxo_installer_and_its_pre_install_step_run_by_digest_and_pass_the_policy() -> None:
    """By default by the digests NVIDIA publishes for their tags; a stack's own digests replace them."""
    published = gpudirect_images.published_digests()
    by_default = render(_stack("train", None))
    by_stack = render(_stack("train", {TCPXO: A, "ubuntu": B}))
    default, pinned = _images(by_default), _images(by_stack)
    installer = "nccl-tcpxo-installer/nccl-tcpxo-installer"
    pre = "nccl-tcpxo-installer/pre-installation"
    assert default[installer] == f"{gpudirect_images.TCPXO_PLUGIN}@{published[TCPXO]}"
    assert default[pre] == f"ubuntu:24.04@{published['ubuntu']}"
    assert pinned[installer] == f"{gpudirect_images.TCPXO_PLUGIN}@{A}"
    assert pinned[pre] == f"ubuntu:24.04@{B}"
    # Nothing else changes (the NRI injector is pinned by Google's digest already).
    assert {k: v for k, v in pinned.items() if k not in (installer, pre)} == {
        k: v for k, v in default.items() if k not in (installer, pre)
    }
    # Without the policy's acceptedByTag list neither has a violation; the render lists no image by tag.
    assert _digest_violations(by_default) == []
    assert _digest_violations(by_stack) == []
    assert by_default.outputs["privilegedImagesByTag"] == []


def test_the_render_lists_every_privileged_image_still_by_tag() -> None:
    """nvl72: gIB's arm64 installer (no digest published for v1.1.0) and the DRA driver's chart image;
    dra: the driver and GKE's preloaded installer; prod and serve: none."""
    from gke_gpu.dra.driver import DRA_DRIVER_IMAGE, DRA_DRIVER_IMAGE_TAG
    from gke_gpu.dra.driver_installer import INSTALLER_IMAGE

    driver = f"{DRA_DRIVER_IMAGE}:{DRA_DRIVER_IMAGE_TAG}"
    assert stack_render("nvl72").outputs["privilegedImagesByTag"] == sorted(
        [gpudirect_images.GIB_PLUGIN_ARM64, driver]
    )
    assert stack_render("dra").outputs["privilegedImagesByTag"] == sorted([INSTALLER_IMAGE, driver])
    for stack in ("prod", "serve", "train"):
        assert stack_render(stack).outputs["privilegedImagesByTag"] == [], stack
    onprem = stack_render("onprem").outputs["privilegedImagesByTag"]
    assert onprem == sorted([images.DCGM_EXPORTER, images.DEVICE_PLUGIN]), onprem


def test_the_dcgm_exporter_and_device_plugin_run_by_digest() -> None:
    dcgm, plugin = images.DCGM_EXPORTER.rsplit(":", 1)[0], images.DEVICE_PLUGIN.rsplit(":", 1)[0]
    pinned = _images(render(_stack("onprem", {dcgm: A, plugin: B})))
    assert pinned["dcgm-exporter/dcgm-exporter"] == f"{images.DCGM_EXPORTER}@{A}"
    assert pinned["nvidia-device-plugin-daemonset/nvidia-device-plugin-ctr"] == f"{images.DEVICE_PLUGIN}@{B}"


@pytest.mark.parametrize(
    "digest",
    ["sha256:" + "a" * 63, "sha256:" + "A" * 64, "sha512:" + "a" * 64, "a" * 64, "sha256:" + "g" * 64],
)
def test_a_digest_that_is_not_sha256_and_64_lowercase_hex_is_refused(digest: str) -> None:
    message = config_error(_raw("train", {TCPXO: digest}))
    assert f"gke-gpu:images.digests.{TCPXO}: {cut(digest, 40)} is not a digest" in message
    assert "is not a digest; allowed: 'sha256:' and 64 lowercase hex digits" in message


def test_an_image_the_stack_does_not_render_is_refused_with_those_it_does() -> None:
    message = config_error(_raw("train", {"nvcr.io/nvidia/k8s/dcgm-exporter": A, "ubuntu": "sha256:1"}))
    assert (
        "gke-gpu:images.digests.nvcr.io/nvidia/k8s/dcgm-exporter: 'nvcr.io/nvidia/k8s/dcgm-exporter' is not "
        f"an image this runs privileged or as root by tag; allowed: the images it renders: ubuntu, {TCPXO}"
    ) in message
    # Each independent problem in one run.
    assert "gke-gpu:images.digests.ubuntu: 'sha256:1' is not a digest" in message


def test_the_component_checks_its_digests_at_its_boundary() -> None:
    def program() -> None:
        GpuDirectSoftware("g", flavor="TCPX", image_digests={"ubuntu": A, TCPXO: "sha256:x"})

    error = run_program({}, program=program).error
    assert error is not None
    text = str(error)
    assert "image_digests.ubuntu: 'ubuntu' is not an image this runs privileged or as root by tag" in text
    assert "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev" in text


def test_the_pinnable_images_are_each_flavours_privileged_images_by_tag() -> None:
    from gke_gpu.gpudirect.software import INSTALLERS

    for flavor, installer in INSTALLERS.items():
        by_tag = [installer.image, *([gpudirect_images.TCPXO_PRE_INSTALL] if installer.pre_install else [])]
        assert list(gpudirect_images.NODE_IMAGES_BY_TAG[flavor]) == by_tag, flavor
        assert all("@" not in image for image in by_tag)


def test_no_stack_file_records_a_digest() -> None:
    from tools.offline import stacks

    for stack in stacks():
        assert "gke-gpu:images" not in load_stack_config(stack)[0], stack
