"""Shared helpers: build a stack config and run the real program under the Pulumi SDK's mocks."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from gke_gpu.stack.config import ConfigError, parse_settings
from tools.offline import RunResult, run_program, run_stack

PROJECT = "test-project"
REGION = "us-central1"

STANDARD_CLUSTER = {"mode": "standard", "name": "gpu-test"}
AUTOPILOT_CLUSTER = {"mode": "autopilot", "name": "gpu-test"}
L4_POOL = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2}


def stack_config(project: str | None = PROJECT, region: str | None = REGION, **keys: Any) -> dict[str, Any]:
    """A config as `Pulumi.<stack>.yaml` would give it: `gcp:` keys plus `gke-gpu:<key>` objects."""
    config: dict[str, Any] = {}
    if project is not None:
        config["gcp:project"] = project
    if region is not None:
        config["gcp:region"] = region
    for key, value in keys.items():
        config[f"gke-gpu:{key}"] = copy.deepcopy(value)
    return config


def render(
    config: dict[str, Any], *, preview: bool = True, stack: str = "test", secret_keys: tuple[str, ...] = ()
) -> RunResult:
    """Run __main__.py with this config (`secret_keys`: the keys a stack file would hold as `secure:`);
    fail the test if the program raised."""
    result = run_program(config, stack=stack, preview=preview, secret_keys=secret_keys)
    if result.error is not None:
        raise result.error
    return result


def config_error(raw: dict[str, Any], *, project: str | None = PROJECT, region: str | None = REGION) -> str:
    """The ConfigError message for `gke-gpu:` keys `raw` (without namespace); fails if valid."""
    with pytest.raises(ConfigError) as info:
        parse_settings(raw, project=project, region=region, stack="test")
    return str(info.value)


def settings(raw: dict[str, Any], *, project: str | None = PROJECT, region: str | None = REGION):
    value, _ = parse_settings(raw, project=project, region=region, stack="test")
    return value


@functools.cache
def _stack_render(stack: str) -> RunResult:
    return run_stack(stack)


def stack_render(stack: str) -> RunResult:
    """`run_stack(stack)` (a preview of an example stack file), rendered once per test process: the
    example stacks are rendered by many tests, and a render is deterministic. Each caller gets its own
    copy. A test that patches the program must call `run_stack` itself."""
    return copy.deepcopy(_stack_render(stack))
