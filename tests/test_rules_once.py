"""Each GPU pool's rules run once per render: the stack layer runs them on the stack file's entry and
hands the checked pool to GpuNodePool or GpuComputeClass (CheckedArgs), which does not run them again.
A program of one's own that declares the components with plain args gets them run there, once."""

from __future__ import annotations

from typing import Any

import pytest

from gke_gpu.gpu.rules import GpuPoolRules
from tests.conftest import AUTOPILOT_CLUSTER, STANDARD_CLUSTER, render, stack_config

STANDARD_POOLS = [
    {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2},
    {"name": "t4", "accelerator": "nvidia-tesla-t4", "gpusPerNode": 2, "maxNodes": 1, "spot": True},
    {"name": "a100", "accelerator": "nvidia-tesla-a100", "migPartitionSize": "1g.5gb", "maxNodes": 1},
]
AUTOPILOT_PROFILES = [
    {"name": "l4", "accelerator": "nvidia-l4", "spot": True},
    {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "spot": True},
]


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each pool GpuPoolRules.check ran on, in order."""
    seen: list[str] = []
    original = GpuPoolRules.check

    def counting(self: GpuPoolRules, pool: Any, path: str = "") -> Any:
        seen.append(pool.name)
        return original(self, pool, path)

    monkeypatch.setattr(GpuPoolRules, "check", counting)
    return seen


def test_each_standard_pool_is_checked_once_per_render(checked: list[str]) -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=STANDARD_POOLS))
    assert len(result.of_type("gcp:container/nodePool:NodePool")) == 1 + len(STANDARD_POOLS)  # + system
    assert checked == [p["name"] for p in STANDARD_POOLS]


def test_each_autopilot_profile_is_checked_once_per_render(checked: list[str]) -> None:
    result = render(stack_config(cluster=AUTOPILOT_CLUSTER, gpuPools=AUTOPILOT_PROFILES))
    assert result.of_type("kubernetes:cloud.google.com/v1:ComputeClass")
    assert checked == [p["name"] for p in AUTOPILOT_PROFILES]


def test_the_example_stacks_check_each_pool_once(checked: list[str]) -> None:
    from tools.offline import run_stack

    for stack in ("dev", "prod", "train"):
        checked.clear()
        result = run_stack(stack)
        assert result.error is None, result.error
        assert len(checked) == len(set(checked)) > 0, (stack, checked)


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem", "train"])
def test_each_components_args_are_validated_once_per_render(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check_components checks every component's args before anything is declared; the declaration
    then hands each component its checked args instead of checking them again."""
    from gke_gpu.core import component
    from tools.offline import run_stack

    validated: list[tuple[str, str]] = []
    original = component.validate_args

    def counting(name: str, resource: str, *args: Any, **kwargs: Any) -> Any:
        validated.append((name, resource))
        return original(name, resource, *args, **kwargs)

    monkeypatch.setattr(component, "validate_args", counting)
    result = run_stack(stack)
    assert result.error is None, result.error
    assert validated, "the stack declares components that validate their args"
    assert len(validated) == len(set(validated)), sorted(validated)


POOL_STACKS = [
    ("standard", STANDARD_CLUSTER, STANDARD_POOLS),
    ("autopilot", AUTOPILOT_CLUSTER, AUTOPILOT_PROFILES),
]


@pytest.mark.parametrize(("mode", "cluster", "pools"), POOL_STACKS, ids=[s[0] for s in POOL_STACKS])
def test_the_handed_over_pool_is_the_one_the_components_own_check_resolves(mode, cluster, pools) -> None:
    """What the stack layer hands a pool component without checking it again (CheckedArgs) equals what
    the component's own check makes of the same args as a plain dict: every field, and the values the
    rules set beside the fields (MIG partitions per GPU)."""
    from gke_gpu.gpu.compute_class import GpuComputeClass, compute_class_args
    from gke_gpu.gpu.node_pool import GpuNodePool, node_pool_args
    from tests.conftest import settings

    resolved = settings({"cluster": cluster, "gpuPools": pools})
    for pool in resolved.gpu_pools:
        if mode == "standard":
            args: Any = node_pool_args(
                pool, project="test-project", location="us-central1", cluster_name="gpu-test"
            )
            component: Any = GpuNodePool
        else:
            args = compute_class_args(pool, region="us-central1")
            component = GpuComputeClass
        own = component.check_args(f"gpu-{pool.name}", dict(args))
        assert args.spec == own, pool.name
        assert args.spec.mig_partitions_per_gpu == own.mig_partitions_per_gpu
        assert args.spec.schedulable_gpus_per_node == own.schedulable_gpus_per_node
