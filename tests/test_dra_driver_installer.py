"""The NVIDIA driver on DRA-GPU pools (issue 28 item 4): GKE installs none there (its DRA page), so the
stack declares Google's COS driver installer DaemonSet, scoped to those pools, and this test holds it
to Google's manifest field by field (vendored under tests/upstream/container-engine-accelerators/
nvidia-driver-installer/cos with its source, commit and date in a header)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.dra.driver import NvidiaDraDriver
from gke_gpu.dra.driver_installer import INSTALLER_COMMIT, InstallerVariant, installer_variant
from tests.conftest import RACK_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tests.kubernetes_schemas import validate
from tools.offline import RunResult, run_program

UPSTREAM = (
    Path(__file__).parent / "upstream" / "container-engine-accelerators" / "nvidia-driver-installer" / "cos"
)
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
HEADER_LINES = 5
# file -> git blob id of the published file at INSTALLER_COMMIT (git rev-parse COMMIT:path).
VENDORED = {
    "daemonset-preloaded-latest.yaml": "6a9083665c77e2072dbd0dcd99b200d997bdf5dc",
    "daemonset-preloaded-latest-a4x.yaml": "ed83969123e3e7530d4893bb979afcb20b96a031",
}
MIRRORS = {
    InstallerVariant.COS: "daemonset-preloaded-latest.yaml",
    InstallerVariant.COS_A4X: "daemonset-preloaded-latest-a4x.yaml",
}
# Every place our DaemonSet differs from Google's, with why (the test requires exactly these).
DIFFERENCES = {
    "metadata.name": "not upstream's nvidia-driver-installer, so a copy applied by hand is not taken over",
    "metadata.labels": "k8s-app names our object; the app.kubernetes.io labels every object of ours has",
    "spec.selector": "k8s-app names our object",
    "template labels": "name and k8s-app name our object",
    "affinity": "one expression more: the DRA pools by name (cloud.google.com/gke-nodepool In ...)",
    "automountServiceAccountToken": "false: nothing in the Pod calls the Kubernetes API",
    "enableServiceLinks": "false: nothing in the Pod reads Services from its environment",
    "securityContext": "seccomp RuntimeDefault, which takes effect on the unprivileged pause only",
    "pause": "resources and a non-root, read-only, no-capability security context for pause",
}


def published(variant: InstallerVariant) -> dict[str, Any]:
    return yaml.safe_load((UPSTREAM / MIRRORS[variant]).read_text(encoding="utf-8"))


def construct(args: dict[str, Any]) -> RunResult:
    def program() -> dict[str, Any]:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        NvidiaDraDriver("dra", args, opts=pulumi.ResourceOptions(provider=provider))
        return {}

    result = run_program({}, program=program)
    assert result.error is None, result.error
    return result


@pytest.fixture(scope="module")
def declared() -> dict[InstallerVariant, dict[str, Any]]:
    result = construct(
        {
            "gpus": True,
            "node_pools": ["l4", "l4b", "gb200"],
            "driver_installer_pools": ["l4b", "l4"],
            "driver_installer_a4x_pools": ["gb200"],
        }
    )
    found = {r.inputs["metadata"]["name"]: r.inputs for r in result.of_type(DAEMON_SET)}
    return {
        InstallerVariant.COS: found["nvidia-driver-installer-dra"],
        InstallerVariant.COS_A4X: found["nvidia-driver-installer-dra-a4x"],
    }


def differences(ours: dict[str, Any], theirs: dict[str, Any], pools: list[str]) -> dict[str, tuple[Any, Any]]:
    """Where our DaemonSet differs from the published one, by the names DIFFERENCES uses; every other
    field must be equal (asserted here)."""
    ours, theirs = yaml.safe_load(yaml.safe_dump(ours)), yaml.safe_load(yaml.safe_dump(theirs))
    found: dict[str, tuple[Any, Any]] = {}

    def take(name: str, a: Any, b: Any) -> None:
        if a != b:
            found[name] = (a, b)

    take("metadata.name", ours["metadata"].pop("name"), theirs["metadata"].pop("name"))
    take("metadata.labels", ours["metadata"].pop("labels"), theirs["metadata"].pop("labels"))
    take("spec.selector", ours["spec"].pop("selector"), theirs["spec"].pop("selector"))
    template, their_template = ours["spec"].pop("template"), theirs["spec"].pop("template")
    take("template labels", template.pop("metadata"), their_template.pop("metadata"))
    spec, their_spec = template.pop("spec"), their_template.pop("spec")
    affinity, their_affinity = spec.pop("affinity"), their_spec.pop("affinity")
    take("affinity", copy.deepcopy(affinity), their_affinity)
    (term,) = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # Ours is the last expression; without it the affinity is upstream's, expression for expression.
    assert term["matchExpressions"].pop() == {
        "key": "cloud.google.com/gke-nodepool",
        "operator": "In",
        "values": pools,
    }
    assert affinity == their_affinity
    for key in ("automountServiceAccountToken", "enableServiceLinks", "securityContext"):
        take(key, spec.pop(key, None), their_spec.pop(key, None))
    (pause,), (their_pause,) = spec.pop("containers"), their_spec.pop("containers")
    take("pause", pause, their_pause)
    assert (pause["name"], pause["image"]) == (their_pause["name"], their_pause["image"])
    # The rest (init containers: images, pull policy, commands, env, mounts, privilege, requests;
    # volumes, tolerations, host namespaces, priority) equal, and nothing else in either object.
    assert spec == their_spec
    assert (template, ours["spec"], ours["metadata"]) == (their_template, theirs["spec"], theirs["metadata"])
    assert (ours["apiVersion"], ours["kind"]) == (theirs["apiVersion"], theirs["kind"])
    return found


def test_the_vendored_manifests_are_the_published_files_under_a_source_header() -> None:
    for name, blob in VENDORED.items():
        lines = (UPSTREAM / name).read_bytes().splitlines(keepends=True)
        header, body = lines[:HEADER_LINES], b"".join(lines[HEADER_LINES:])
        assert all(line.startswith(b"#") for line in header)
        assert INSTALLER_COMMIT.encode() in b"".join(header) and blob.encode() in b"".join(header)
        found = hashlib.sha1(b"blob %d\0" % len(body) + body, usedforsecurity=False).hexdigest()
        assert found == blob, f"{name}: re-vendor verbatim below the header"


@pytest.mark.parametrize("variant", list(InstallerVariant))
def test_the_installer_is_googles_manifest_field_by_field(
    declared: dict[InstallerVariant, dict[str, Any]], variant: InstallerVariant
) -> None:
    ours = {"apiVersion": "apps/v1", "kind": "DaemonSet", **declared[variant]}
    pools = ["l4", "l4b"] if variant is InstallerVariant.COS else ["gb200"]
    found = differences(ours, published(variant), pools)
    assert set(found) == set(DIFFERENCES), sorted(set(found) ^ set(DIFFERENCES))
    validate(ours)


DRA_POOL = {
    "name": "l4",
    "accelerator": "nvidia-l4",
    "gpusPerNode": 1,
    "maxNodes": 2,
    "draGpus": True,
    "driverVersion": "INSTALLATION_DISABLED",
}
NO_DCGM = {"dcgm": "none", "dashboard": False}


def test_a_stack_installs_the_driver_on_its_dra_pools_only() -> None:
    t4 = {
        "name": "t4",
        "accelerator": "nvidia-tesla-t4",
        "maxNodes": 1,
        "driverVersion": "INSTALLATION_DISABLED",
    }
    result = render(
        stack_config(
            cluster={**STANDARD_CLUSTER, "minimumVersion": "1.34"},
            gpuPools=[DRA_POOL, {**DRA_POOL, "name": "l4b"}, t4],
            monitoring=NO_DCGM,
        )
    )
    (installer,) = result.of_type(DAEMON_SET)
    assert installer.name == "dra-driver-nvidia-driver-installer-dra"
    spec = installer.inputs["spec"]["template"]["spec"]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    # The DRA pools, not t4 (whose driver its user installs: INSTALLATION_DISABLED without DRA).
    assert term["matchExpressions"][-1]["values"] == ["l4", "l4b"]
    assert installer.inputs["metadata"]["namespace"] == "kube-system"


def test_no_installer_without_a_dra_pool() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1, "driverVersion": "LATEST"}],
        )
    )
    assert [r for r in result.of_type(DAEMON_SET) if "driver-installer" in r.name] == []


def test_each_dra_pool_takes_the_manifest_google_publishes_for_its_machine() -> None:
    assert installer_variant("nvidia-l4") is InstallerVariant.COS
    assert installer_variant("nvidia-h100-80gb") is InstallerVariant.COS
    # A4X (GB200, Arm): Google's A4X manifest, without the x86-only partition-gpus step.
    assert installer_variant("nvidia-gb200") is InstallerVariant.COS_A4X
    # A4X Max (GB300, bare metal): none published at the pinned commit.
    assert installer_variant("nvidia-gb300") is None


def test_the_component_checks_its_installer_pools() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        NvidiaDraDriver.check_args(
            "dra",
            {
                "gpus": True,
                "node_pools": ["l4"],
                "driver_installer_pools": ["l4", "h100"],
                "driver_installer_a4x_pools": ["l4"],
            },
        )
    text = str(refused.value)
    assert "driver_installer_pools: 'h100' is not one of node_pools" in text
    assert "driver_installer_a4x_pools: 'l4' is listed twice (or in both installer lists)" in text


def test_serving_on_a_dra_pool_relies_on_the_installers_latest_driver() -> None:
    # The serving rule asks for driverVersion LATEST (vLLM's CUDA 13 needs R580+) except on a DRA pool,
    # whose driver is the installer's --version=latest.
    assert (
        "/cos-gpu-installer install --version=latest"
        in published(InstallerVariant.COS)["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    )
    chat = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen2.5-1.5b-instruct"}
    t4 = {
        "name": "t4",
        "accelerator": "nvidia-tesla-t4",
        "maxNodes": 1,
        "driverVersion": "INSTALLATION_DISABLED",
    }
    message = config_error(
        {
            "cluster": {**STANDARD_CLUSTER, "minimumVersion": "1.34"},
            "gpuPools": [DRA_POOL, t4],
            "monitoring": NO_DCGM,
            "serving": [chat, {**chat, "name": "other", "pool": "t4"}],
        }
    )
    # Only the pool whose driver nobody installs is refused.
    assert "serving[1].pool: 't4' runs driverVersion INSTALLATION_DISABLED" in message
    assert "serving[0]" not in message


def test_a_gb200_dra_pool_gets_googles_a4x_installer_beside_the_x86_one() -> None:
    rack = {**RACK_POOL, "draGpus": True, "driverVersion": "INSTALLATION_DISABLED"}
    result = render(
        stack_config(
            cluster={**STANDARD_CLUSTER, "minimumVersion": "1.34"},
            gpuPools=[rack, DRA_POOL],
            monitoring=NO_DCGM,
        )
    )
    pools = {}
    for installer in result.of_type(DAEMON_SET):
        spec = installer.inputs["spec"]["template"]["spec"]
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        pools[installer.inputs["metadata"]["name"]] = term["matchExpressions"][-1]["values"]
        # Google's A4X manifest has no partition-gpus step (its image is x86 only).
        steps = [c["name"] for c in spec["initContainers"]]
        assert ("partition-gpus" in steps) is (
            installer.inputs["metadata"]["name"] == "nvidia-driver-installer-dra"
        )
    assert pools == {"nvidia-driver-installer-dra": ["l4"], "nvidia-driver-installer-dra-a4x": ["rack"]}
