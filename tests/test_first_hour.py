"""What a new user meets in the first hour is true (issue 36, item 5; review-2026-12 section 5): a
misspelt top-level key names what was meant and brings no false follow-on problem, and each stack's
check commands fit its pools (a DRA pool's GPUs are ResourceSlices, not `nvidia.com/gpu`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gke_gpu.stack.config import ConfigError, parse_settings
from tests.conftest import render, stack_config, stack_render

L4 = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2}
DRA_L4 = {**L4, "name": "dra", "draGpus": True, "driverVersion": "INSTALLATION_DISABLED"}
STANDARD = {"mode": "standard", "name": "gpu", "minimumVersion": "1.34"}


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        parse_settings(raw, project="test-project", region="us-central1", stack="t")
    return [str(p) for p in refused.value.problems]


@pytest.mark.parametrize(
    ("given", "meant"),
    [("gpuPool", "gpuPools"), ("GpuPools", "gpuPools"), ("gpupools", "gpuPools"), ("Cluster", "cluster")],
)
def test_a_misspelt_top_level_key_names_the_key_meant_and_nothing_else(given: str, meant: str) -> None:
    raw: dict[str, Any] = {
        "cluster": STANDARD,
        "gpuPools": [L4],
        "workloads": ["nvidia-smi"],
        "batch": {"kueue": True},
    }
    raw[given] = raw.pop(meant)
    (problem,) = _problems(raw)
    assert problem.startswith(f"gke-gpu:{given}: unknown key; did you mean gke-gpu:{meant}?"), problem


def test_an_unknown_key_near_nothing_gets_no_guess_and_the_rest_is_still_judged() -> None:
    problems = _problems({"cluster": STANDARD, "colour": "red", "workloads": ["nvidia-smi"]})
    assert problems[0].startswith("gke-gpu:colour: unknown key; allowed keys:")
    assert any("gke-gpu:gpuPools is empty" in p for p in problems), "a real empty-pools problem stays"


def test_a_dra_stack_checks_resource_slices_not_allocatable_gpus() -> None:
    checks = stack_render("dra").outputs["checks"]
    assert "allocatableGpus" not in checks and "devicePluginPods" not in checks
    assert checks["draResourceSlices"].startswith(
        "kubectl get resourceslices --field-selector spec.driver=gpu.nvidia.com"
    )
    assert checks["draResourceClaims"] == "kubectl get resourceclaims -A -o wide"
    assert checks["draDriverPods"] == "kubectl get pods -n dra-driver-nvidia-gpu -o wide"


def test_a_stack_of_both_kinds_counts_allocatable_gpus_only_off_its_dra_pools() -> None:
    config = stack_config(cluster=STANDARD, gpuPools=[L4, copy.deepcopy(DRA_L4)], monitoring={"dcgm": "none"})
    checks = render(config).outputs["checks"]
    assert (
        "-l 'cloud.google.com/gke-accelerator,cloud.google.com/gke-nodepool notin (dra)'"
        in checks["allocatableGpus"]
    )
    assert "draResourceSlices" in checks and "devicePluginPods" in checks


def test_a_device_plugin_stack_keeps_its_gpu_checks() -> None:
    checks = stack_render("prod").outputs["checks"]
    assert "allocatableGpus" in checks and "draResourceSlices" not in checks


def test_an_nvl72_stack_checks_its_compute_domains() -> None:
    checks = stack_render("nvl72").outputs["checks"]
    assert checks["computeDomains"] == "kubectl get computedomains -A"


def test_every_stacks_checks_run_as_given_and_the_manager_has_no_gpu_checks() -> None:
    import subprocess

    for stack in ("dev", "dra", "fleet"):
        checks = stack_render(stack).outputs["checks"]
        for name, command in checks.items():
            checked = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
            assert checked.returncode == 0, (stack, name, checked.stderr)
            # Quoted, so that the shell keeps the backslashes of a label's dots.
            assert "custom-columns=NODE" not in command, (stack, name)
        if stack == "fleet":
            # The manager has no GPU pool: nothing of GPUs to check there.
            assert set(checks) == {"getCredentials"}, checks
            continue
        # A field selector's comma-separated requirements must all hold: one reason per selector.
        assert checks["gpuNodeEvents"] == (
            "kubectl get events -A --field-selector reason=TriggeredScaleUp; "
            "kubectl get events -A --field-selector reason=NotTriggerScaleUp"
        )
