"""Declaring a component, or only checking its args: what lets the stack program check every
component's args, as it would declare them, before it declares anything, and check each once.

Under :func:`checking_only`, :func:`declare` calls the component's ``check_args`` instead of its
constructor, keys each problem by the stack file's section the args come from (`section`, said at the
call), keeps the checked args, and returns a stand-in whose outputs are unknown (the args of later
components take them as Outputs, unchecked). The real declaration then hands each component its checked
args (:class:`CheckedArgs`, the spec with the real Outputs put back) where its args are the same as when
they were checked (Outputs aside, which a check never reads), so no component's args are validated twice
in one render. A GPU pool's args come checked from the stack layer's own run of the pool rules
(CheckedArgs already), so no problem is ever keyed by a pool's stack-file path here.

A call with `section_checked` says the stack layer ran the same rules (the functions the domain shares
with the stack file, `cluster/rules.py` and the like) on the section these args are built from: the
component's args are checked against their model only (each field's type and bounds), not its
cross-field rules (`_args_rules`) again, so each rule runs once per render, as a pool's do. That the
components' rules accept what the stack rules accepted is what the fuzz tests
(`tests/test_fuzz_stack_components.py`) check, with ``check_components(settings, component_rules=True)``:
under :func:`checking_only` with `component_rules`, every component's full check runs.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import pulumi

from ..core.common import NAMESPACE
from ..core.component import CheckedArgs
from ..core.validation import UNKNOWN, InvalidArgsError, known

C = TypeVar("C", bound=pulumi.ComponentResource)
# Each component's args as checked, by (class, resource name): the args as plain data, and the spec.
Checked = dict[tuple[type, str], tuple[Any, Any]]
# Set while check_components runs build(): the problems found so far (None: declare for real).
_CHECKING: ContextVar[list[str] | None] = ContextVar("checking_component_args", default=None)
# The checked args: filled while checking, read while declaring for real.
_CHECKED: ContextVar[Checked | None] = ContextVar("checked_component_args", default=None)
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


def declare(
    cls: type[C],
    name: str,
    args: Any,
    opts: pulumi.ResourceOptions | None = None,
    *,
    section: str,
    section_checked: bool = False,
) -> C:
    """Declare a component, or, under checking_only, only check its args: `section` is the stack
    file's key its args come from (`network`), which a problem is keyed by; `section_checked`, that
    the section's rules ran the component's own rules on them (its args' model is checked only)."""
    problems = _CHECKING.get()
    if problems is None:
        checked = _CHECKED.get() or {}
        plain, spec = checked.get((cls, name), (None, None))
        if spec is not None and not isinstance(args, CheckedArgs) and known(args) == plain:
            args = CheckedArgs(args, spec)
        return cls(name, args, opts=opts)
    rules = _COMPONENT_RULES.get() or not section_checked
    try:
        spec = cls.check_args(name, args, rules=rules)  # type: ignore[attr-defined]
    except InvalidArgsError as exc:
        key = f"{NAMESPACE}:{section}"
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
