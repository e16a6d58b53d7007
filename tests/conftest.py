"""Shared helpers: build a stack config and run the real program under the Pulumi SDK's mocks."""

from __future__ import annotations

import atexit
import copy
import gc
import hashlib
import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis
import pytest

# The library, the tools and the SDK are imported where they are used: pytest-xdist's controller
# loads this file too, runs no test, and starts its workers only after it (~0.3 s sooner this way).
if TYPE_CHECKING:
    from gke_gpu.stack.config import Settings
    from tools.offline import RunResult

# Every property test runs the same examples on every run (a failure reproduces; CI does not find a
# new one by chance), with no per-example deadline or "too slow" check: those time the machine, and
# failed under load. Hangs are guarded by tests/hang_guard.py and the fuzz's own settings.
hypothesis.settings.register_profile(
    "gke-gpu",
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.load_profile("gke-gpu")

PROJECT = "test-project"
REGION = "us-central1"

STANDARD_CLUSTER = {"mode": "standard", "name": "gpu-test"}
AUTOPILOT_CLUSTER = {"mode": "autopilot", "name": "gpu-test"}
L4_POOL = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2}
# L4 pools whose GPUs the DRA driver hands out (GKE 1.34+; GKE installs no driver there): two GPUs
# a node (g2-standard-24), or one in one zone.
DRA_CLUSTER = {**STANDARD_CLUSTER, "minimumVersion": "1.34"}
DRA_POOL = {
    "name": "l4",
    "accelerator": "nvidia-l4",
    "gpusPerNode": 2,
    "maxNodes": 2,
    "draGpus": True,
    "driverVersion": "INSTALLATION_DISABLED",
}
DRA_L4_POOL = {**DRA_POOL, "gpusPerNode": 1, "zones": ["us-central1-a"]}


def service_args(pool: str = "l4", model: str = "gs://models-bucket/qwen", **more: Any) -> dict[str, Any]:
    """InferenceService's required args (as a program passes them), serving `model` on node pool `pool`."""
    return {
        "model": model,
        "node_selector": {"cloud.google.com/gke-nodepool": pool},
        "tolerations": [],
        "project": "p-123456",
        "cluster_name": "gpu",
        **more,
    }


def pool_args(
    accelerator: str = "nvidia-l4", gpus_per_node: int = 1, max_nodes: int = 2, **more: Any
) -> dict[str, Any]:
    """GpuNodePool's required args (as a program passes them): an L4 GPU a node by default."""
    return {
        "project": "p-123456",
        "location": "us-central1",
        "cluster_name": "gpu-cluster",
        "accelerator": accelerator,
        "gpus_per_node": gpus_per_node,
        "max_nodes": max_nodes,
        **more,
    }


def cluster_args(**more: Any) -> dict[str, Any]:
    """GkeCluster's args for a Standard cluster on a network of its own (as a program passes them)."""
    return {
        "project": "p-123456",
        "name": "gpu",
        "location": "us-central1",
        "autopilot": False,
        "network": "gpu-vpc",
        "subnetwork": "gpu-nodes",
        "pods_range_name": "pods",
        "services_range_name": "services",
        **more,
    }


# A GB200 rack's pool: reserved capacity and its workload policy (tests/test_nvl72_racks.py).
RACK_POOL = {
    "name": "rack",
    "accelerator": "nvidia-gb200",
    "maxNodes": 2,
    "zones": ["us-central1-a"],
    "workloadPolicy": True,
    "reservation": {"type": "SPECIFIC", "name": "a4x-rack"},
}
# The GPUDirect pools, zonal: A3 Mega with GPUDirect-TCPXO (2 nodes x 8 GPUs = 16; a3-megagpu-8g has
# 208 vCPUs and 1,872 GB), A3 Ultra (H200, GPUDirect RDMA) in another zone, and a rack: reserved
# GB200 capacity with its workload policy (the NVL72 rules, tests/test_nvl72_racks.py).
ZONAL_CLUSTER = {**STANDARD_CLUSTER, "location": "us-central1-a"}
MEGA_POOL = {
    "name": "train",
    "accelerator": "nvidia-h100-mega-80gb",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "zones": ["us-central1-a"],
    "gpudirect": True,
}
ULTRA_POOL = {**MEGA_POOL, "name": "ultra", "accelerator": "nvidia-h200-141gb", "zones": ["us-central1-b"]}
A4X_POOL = {
    **MEGA_POOL,
    "name": "gb",
    "accelerator": "nvidia-gb200",
    "gpusPerNode": 4,
    "workloadPolicy": True,
    "reservation": {"type": "SPECIFIC", "name": "rack"},
}


# Garbage collection, tuned for this suite (no test reads or depends on when it runs). Importing the
# SDKs and collecting leaves ~430,000 long-lived objects that each full collection walks again:
# ~7 s of a 38 s single-process run was the collector. Collection runs without it (imports make
# little cyclic garbage); then one full collection, the survivors frozen (never scanned again), and
# a larger young generation, so that cyclic garbage is still freed but a full pass is rare.
GC_THRESHOLD = (10_000, 10, 10)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    gc.disable()
    try:
        return (yield)
    finally:
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLD)
        gc.enable()
        if session.items:  # not in pytest-xdist's controller
            _no_stack_traces()


# And at exit (after pytest's own last collections): the interpreter's final collections would walk
# every object made since, ~0.6 s in each xdist worker, which the run waits for.
atexit.register(gc.freeze)


def _no_stack_traces() -> None:
    """For each resource, the SDK records the Python stack that declared it (every frame's file as a
    URI, pytest's forty-odd frames included) for the engine's diagnostics. The mock monitor that every
    render here runs under reads none of it, so no render, output or error depends on it; it was
    ~0.7 ms a resource, 2.8 s of a 25 s single-process run. Here it records an empty stack, as the SDK
    itself does when it finds no user frame. (If the SDK renames it, this does nothing.)"""
    import pulumi.runtime.resource
    from pulumi.runtime.proto import source_pb2

    if hasattr(pulumi.runtime.resource, "_get_stack_trace"):
        pulumi.runtime.resource._get_stack_trace = source_pb2.StackTrace


# The test being run, for render()'s cache: set before its fixtures (module-scoped ones included).
_running: dict[str, pytest.Item | None] = {"item": None}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _running["item"] = item


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    _running["item"] = None


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
    fail the test if the program raised. Shared (below): not while the test uses `monkeypatch` (every
    test that patches does so through it), nor outside a test: then the program runs as it is now."""
    from tools.offline import run_program

    key = _render_key(config, preview=preview, stack=stack, secret_keys=secret_keys)
    result = _shared(key, lambda: run_program(config, stack=stack, preview=preview, secret_keys=secret_keys))
    if result.error is not None:
        raise result.error
    return result


def stack_render(stack: str, *, preview: bool = True) -> RunResult:
    """`run_stack(stack, preview=preview)` (an example stack file, as a preview or as an update would
    declare it), shared (below) even while a test patches: a test that patches the program must call
    `run_stack` itself."""
    from tools.offline import run_stack

    return _shared(f"stack {stack} preview={preview}", lambda: run_stack(stack, preview=preview))


# Renders, shared. A render is deterministic (the same resources, inputs and outputs; only the order
# in which the resources register can differ, as between any two runs), and many tests render the
# same config or example stack, in files that pytest-xdist's `--dist loadfile` may send to either
# worker. So a successful render is kept by its content (the exact config and options, or the stack
# file's name): in this process, and under xdist in a folder the controller makes for the session,
# from which the other worker reads it instead of rendering it again. Each caller gets its own copy.
_RENDERS: dict[str, RunResult] = {}
_SHARED_FOLDER = "gke_gpu_render_folder"  # the workers' workerinput key
_folder: dict[str, Path | None] = {"path": None}
_controller_key = pytest.StashKey[dict[str, str]]()


def _shared(key: str | None, make: Callable[[], RunResult]) -> RunResult:
    if key is None:
        return make()
    found = _RENDERS.get(key)
    folder = _folder["path"]
    name = hashlib.sha256(key.encode()).hexdigest() + ".pickle"
    if found is None and folder is not None and (folder / name).exists():
        found = pickle.loads((folder / name).read_bytes())
    if found is None:
        found = make()
        if found.error is not None:
            return found
        if folder is not None:  # written whole, then renamed: the other worker never reads a part
            part = folder / f"{name}.{os.getpid()}"
            part.write_bytes(pickle.dumps(found))
            os.replace(part, folder / name)
    _RENDERS[key] = found
    return copy.deepcopy(found)


def _render_key(
    config: dict[str, Any], *, preview: bool, stack: str, secret_keys: tuple[str, ...]
) -> str | None:
    item = _running["item"]
    if item is None or "monkeypatch" in getattr(item, "fixturenames", ("monkeypatch",)):
        return None
    try:
        values = [(key, type(value).__name__, json.dumps(value)) for key, value in config.items()]
    except (TypeError, ValueError):
        return None
    return json.dumps([values, preview, stack, list(secret_keys)])


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get(_SHARED_FOLDER):
        _folder["path"] = Path(workerinput[_SHARED_FOLDER])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller, for each worker it starts: the session's render folder."""
    config = node.config
    if _SHARED_FOLDER not in config.stash.get(_controller_key, {}):
        folder = tempfile.mkdtemp(prefix="gke-gpu-renders-")
        config.stash[_controller_key] = {_SHARED_FOLDER: folder}
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    node.workerinput[_SHARED_FOLDER] = config.stash[_controller_key][_SHARED_FOLDER]


def config_error(raw: dict[str, Any], *, project: str | None = PROJECT, region: str | None = REGION) -> str:
    """The ConfigError message for `gke-gpu:` keys `raw` (without namespace); fails if valid."""
    from gke_gpu.stack.config import ConfigError, parse_settings

    with pytest.raises(ConfigError) as info:
        parse_settings(raw, project=project, region=region, stack="test")
    return str(info.value)


def settings(raw: dict[str, Any], *, project: str | None = PROJECT, region: str | None = REGION) -> Settings:
    from gke_gpu.stack.config import parse_settings

    value, _ = parse_settings(raw, project=project, region=region, stack="test")
    return value
