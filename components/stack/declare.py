"""Declaring a component, or only checking its args: what lets the stack program check every
component's args, as it would declare them, before it declares anything, and check each once.

Under :func:`checking_only`, :func:`declare` calls the component's ``check_args`` instead of its
constructor, keys each problem by the stack file's section the args come from, keeps the checked
args, and returns a stand-in whose outputs are unknown (the args of later components take them as
Outputs, unchecked). The real declaration then hands each component its checked args
(:class:`CheckedArgs`) where its args are the same as when they were checked (Outputs aside, which a
check never reads), so no component's args are validated twice in one render. A GPU pool's args come
checked from the stack layer's own run of the pool rules (CheckedArgs already), so no problem is ever
keyed by a pool's stack-file path here.

The components in :data:`_SECTION_RULES_RAN` are checked against their args' model only (each
field's type and bounds), not their cross-field rules (`_args_rules`): the stack layer ran the same
rules (the functions the domain shares with the stack file, `cluster/rules.py` and the like) on the
section their args are built from, and the rest of their rules are about args the program builds
itself. So each rule runs once per render, as a pool's do. That the components' rules accept what
the stack rules accepted is what the fuzz tests (`tests/test_fuzz_stack_components.py`) check, with
``check_components(settings, component_rules=True)``: under :func:`checking_only` with
`component_rules`, every component's full check runs.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import pulumi

from ..cluster.existing import ExistingCluster
from ..cluster.gke_cluster import GkeCluster
from ..core.common import NAMESPACE
from ..core.component import CheckedArgs
from ..core.validation import UNKNOWN, InvalidArgsError, known
from ..gpu.compute_class import GpuComputeClass
from ..gpu.device_plugin import NvidiaDevicePlugin
from ..gpu.node_labels import GpuNodeLabels
from ..gpu.node_pool import GpuNodePool
from ..gpudirect.networks import GpuDirectNetworks
from ..gpudirect.software import GpuDirectSoftware
from ..monitoring.gpu_monitoring import GpuMonitoring
from ..network.vpc import GkeNetwork
from ..workloads.batch_queues import GpuBatchQueues
from ..workloads.nccl_allreduce import NcclAllReduce
from ..workloads.samples import SampleWorkloads

C = TypeVar("C", bound=pulumi.ComponentResource)
# Each component's args as checked, by (class, resource name): the args as plain data, and the spec.
Checked = dict[tuple[type, str], tuple[Any, Any]]
# Set while check_components runs build(): the problems found so far (None: declare for real).
_CHECKING: ContextVar[list[str] | None] = ContextVar("checking_component_args", default=None)
# The checked args: filled while checking, read while declaring for real.
_CHECKED: ContextVar[Checked | None] = ContextVar("checked_component_args", default=None)
# Where in the stack file each component's args come from.
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
    GpuNodePool: f"{NAMESPACE}:gpuPools",
    GpuComputeClass: f"{NAMESPACE}:gpuPools",
}
# Components most stacks do not use, by name: their modules are imported only by the stacks that do.
_STACK_KEYS_BY_NAME = {
    "GpuCapacityLadder": f"{NAMESPACE}:gpuPools",
    "ImageCacheAllowlist": f"{NAMESPACE}:gpuPools",
    "GpuDirectAdmission": f"{NAMESPACE}:gpuPools",
    "DranetClaimTemplates": f"{NAMESPACE}:gpuPools",
    "G4SecondNetwork": f"{NAMESPACE}:gpuPools",
    "InferenceService": f"{NAMESPACE}:serving",
    "CustomMetricsAdapter": f"{NAMESPACE}:serving",
    "HyperdiskMlTransferClass": f"{NAMESPACE}:serving",
    "ServingLoadTest": f"{NAMESPACE}:workloads",
    "LeaderWorkerSetController": f"{NAMESPACE}:serving",
    "InferenceGateway": f"{NAMESPACE}:serving",
    "ImageMirror": f"{NAMESPACE}:serving",
    "NvidiaDraDriver": f"{NAMESPACE}:gpuPools",
    "MultiKueueManager": f"{NAMESPACE}:fleet",
    "MultiKueueWorkerAccess": f"{NAMESPACE}:fleet",
    "FleetPeering": f"{NAMESPACE}:fleet",
    "MultiKueueStateMetrics": f"{NAMESPACE}:fleet",
}
# The components whose section's rules the stack layer ran (the ones they share with it): only
# their args' model is checked in a render, not their rules again (see the module's docstring).
_SECTION_RULES_RAN = {GkeCluster, GkeNetwork, GpuMonitoring, GpuDirectNetworks, GpuBatchQueues}
_SECTION_RULES_RAN_BY_NAME = {"InferenceService", "G4SecondNetwork"}
# Set under checking_only(component_rules=True): every component's full check (the fuzz tests).
_COMPONENT_RULES: ContextVar[bool] = ContextVar("component_rules", default=False)
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


def declare(cls: type[C], name: str, args: Any, opts: pulumi.ResourceOptions | None = None) -> C:
    """Declare a component, or, under checking_only, only check its args."""
    problems = _CHECKING.get()
    if problems is None:
        checked = _CHECKED.get() or {}
        plain, spec = checked.get((cls, name), (None, None))
        if spec is not None and not isinstance(args, CheckedArgs) and known(args) == plain:
            args = CheckedArgs(args, spec)
        return cls(name, args, opts=opts)
    rules = _COMPONENT_RULES.get() or not (
        cls in _SECTION_RULES_RAN or cls.__name__ in _SECTION_RULES_RAN_BY_NAME
    )
    try:
        spec = cls.check_args(name, args, rules=rules)  # type: ignore[attr-defined]
    except InvalidArgsError as exc:
        key = _STACK_KEYS.get(cls) or _STACK_KEYS_BY_NAME[cls.__name__]
        problems += [f"{key}: {cls.__name__} {name!r}: {problem}" for problem in exc.problems]
    else:
        record = _CHECKED.get()
        if record is not None and not isinstance(args, CheckedArgs):
            record[(cls, name)] = (known(args), spec)
    return _StandIn(cls)  # type: ignore[return-value]


@contextmanager
def checking_only(*, component_rules: bool = False) -> Iterator[tuple[list[str], Checked]]:
    """Within this block, `declare` only checks args; it yields the problems and the checked args.
    With `component_rules`, every component's rules run, those the stack layer ran too."""
    problems: list[str] = []
    checked: Checked = {}
    token, specs = _CHECKING.set(problems), _CHECKED.set(checked)
    full = _COMPONENT_RULES.set(component_rules)
    try:
        yield problems, checked
    finally:
        _CHECKING.reset(token)
        _CHECKED.reset(specs)
        _COMPONENT_RULES.reset(full)


@contextmanager
def declaring_checked(checked: Checked) -> Iterator[None]:
    """Within this block, `declare` hands a component the args checked under checking_only."""
    token = _CHECKED.set(checked)
    try:
        yield
    finally:
        _CHECKED.reset(token)
