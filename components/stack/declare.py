"""Declaring a component, or only checking its args: what lets the stack program check every
component's args, as it would declare them, before it declares anything.

Under :func:`checking_only`, :func:`declare` calls the component's ``check_args`` instead of its
constructor, keys each problem by the stack file's path the args come from, and returns a stand-in
whose outputs are unknown (the args of later components take them as Outputs, unchecked).
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import pulumi
from pydantic.alias_generators import to_camel

from ..cluster.existing import ExistingCluster
from ..cluster.gke_cluster import GkeCluster
from ..core.common import NAMESPACE
from ..core.validation import UNKNOWN, InvalidArgsError
from ..gpu.device_plugin import NvidiaDevicePlugin
from ..gpu.node_labels import GpuNodeLabels
from ..gpu.pool import GpuPool, ReservationConfig, SharingConfig, TaintConfig
from ..gpudirect.networks import GpuDirectNetworks
from ..gpudirect.software import GpuDirectSoftware
from ..monitoring.gpu_monitoring import GpuMonitoring
from ..network.vpc import GkeNetwork
from ..workloads.batch_queues import GpuBatchQueues
from ..workloads.nccl_allreduce import NcclAllReduce
from ..workloads.samples import SampleWorkloads

C = TypeVar("C", bound=pulumi.ComponentResource)
# Set while check_components runs build(): the problems found so far (None: declare for real).
_CHECKING: ContextVar[list[str] | None] = ContextVar("checking_component_args", default=None)
# Where in the stack file each component's args come from (pools are keyed by their index).
_STACK_KEYS = {
    GkeNetwork: f"{NAMESPACE}:network",
    GpuDirectNetworks: f"{NAMESPACE}:network",
    GpuDirectSoftware: f"{NAMESPACE}:gpuPools",
    GkeCluster: f"{NAMESPACE}:cluster",
    ExistingCluster: f"{NAMESPACE}:cluster",
    GpuMonitoring: f"{NAMESPACE}:monitoring",
    SampleWorkloads: f"{NAMESPACE}:workloads",
    GpuNodeLabels: f"{NAMESPACE}:gpuNodes",
    NvidiaDevicePlugin: f"{NAMESPACE}:devicePlugin",
    GpuBatchQueues: f"{NAMESPACE}:batch",
    NcclAllReduce: f"{NAMESPACE}:workloads",
}
# What the program reads from a component besides its outputs, while only checking.
_STAND_IN_ATTRIBUTES: dict[str, Any] = {"provider": None, "alert_policies": [], "commands": {}}


class _StandIn(pulumi.ComponentResource):
    """A component not declared (its args were only checked): every output unknown. A Resource only
    so that it may stand in `depends_on`; it never registers (no super().__init__)."""

    def __init__(self, cls: type) -> None:
        self._outputs = {name for klass in cls.__mro__ for name in getattr(klass, "__annotations__", {})}

    def __getattr__(self, name: str) -> Any:
        if name in _STAND_IN_ATTRIBUTES:
            return _STAND_IN_ATTRIBUTES[name]
        if name in self._outputs:
            return UNKNOWN
        raise AttributeError(name)


def declare(
    cls: type[C], name: str, args: Any, opts: pulumi.ResourceOptions | None = None, *, key: str | None = None
) -> C:
    """Declare a component, or, under checking_only, only check its args (`key`: the stack-file path of
    a GPU pool's args; other components are keyed by their section)."""
    problems = _CHECKING.get()
    if problems is None:
        return cls(name, args, opts=opts)
    try:
        cls.check_args(name, args)  # type: ignore[attr-defined]
    except InvalidArgsError as exc:
        where = key or _STACK_KEYS[cls]
        if key is not None:  # a pool: the args are the stack file's keys, in snake_case
            problems += [f"{where}.{_camel_path(problem)}" for problem in exc.problems]
        else:
            problems += [f"{where}: {cls.__name__} {name!r}: {problem}" for problem in exc.problems]
    return _StandIn(cls)  # type: ignore[return-value]


# A pool's args are its stack-file keys in snake_case: those names, and only those (not a label key or
# a value the user wrote), read in camelCase in a problem keyed by the stack file.
_POOL_KEYS = {
    name: to_camel(name)
    for model in (GpuPool, SharingConfig, ReservationConfig, TaintConfig)
    for name in model.model_fields
    if "_" in name
}
_SNAKE_NAME = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def _camel_path(problem: str) -> str:
    path, sep, message = problem.partition(": ")
    parts = path.split(".")
    # After `labels.`, a part is the user's label key: left as written.
    for i, part in enumerate(parts):
        if i and parts[i - 1].startswith("labels"):
            break
        name, bracket, index = part.partition("[")
        parts[i] = _POOL_KEYS.get(name, name) + bracket + index
    named = _SNAKE_NAME.sub(lambda m: _POOL_KEYS.get(m.group(), m.group()), message)
    return ".".join(parts) + sep + named


@contextmanager
def checking_only() -> Iterator[list[str]]:
    """Within this block, `declare` only checks args; the list it yields collects the problems."""
    problems: list[str] = []
    token = _CHECKING.set(problems)
    try:
        yield problems
    finally:
        _CHECKING.reset(token)
