"""The one base of the public components: the arg check, the type token and its alias, the options.

A component states only what it declares::

    class GkeNetwork(GkeGpuComponent[_GkeNetworkSpec]):
        _args_model = _GkeNetworkSpec
        _args_rules = staticmethod(_network_rules)

        def __init__(
            self, name: str, /, args: GkeNetworkArgs = NO_ARGS, opts: ResourceOptions | None = None,
            **kwargs: Any,
        ) -> None:
            args = self._given(name, args, kwargs)  # one args= mapping, or keyword arguments
            spec = self._begin(name, args, opts)  # checked args; the component is registered
            ...                                   # children, with parent=self
            self.register_outputs({...})

`_begin` checks the args (raising InvalidArgsError, an `InputPropertiesError`, before anything is
declared, the component itself included), registers the component as ``gke-gpu:index:<Class>`` with
the alias to its pre-0.9.0 token, and logs the check's notes on it. Each subclass keeps its own typed
``__init__(self, name, /, args: <Class>Args = NO_ARGS, opts, **kwargs)``: the SDK's schema analyzer
reads the args type from it, and the args come as one mapping or as keywords, as pulumi-gcp's
resources take them (`name` is positional-only, so an arg called `name` is a keyword like any other).
Names on this base start with ``_`` so that the analyzer, which walks the MRO, sees no outputs here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar, cast

import pulumi
from pydantic import BaseModel

from .common import Problem
from .package import component_options, component_type
from .validation import InvalidArgsError, report_notes, validate_args, validate_named_args, with_outputs

SpecT = TypeVar("SpecT")
ArgsT = TypeVar("ArgsT")


class _NoArgs:
    """The default of a component's `args`: none were given (the args may come as keywords)."""

    def __repr__(self) -> str:
        return "NO_ARGS"


# Typed Any so that it is the default of every component's `args: <Class>Args` (the schema analyzer
# reads that annotation, and a Union there would not be a type it can read).
NO_ARGS: Any = _NoArgs()


class CheckedArgs(dict[str, Any], Generic[SpecT]):
    """Args that were already checked: the raw args and the checked spec (with the raw args' Outputs
    put back where the check saw them unknown), which the component takes as it is. The stack layer
    hands args over this way so that nothing is checked twice in a render: a GPU pool's, whose rules
    it ran on the stack file's `gpuPools` entry, and every other component's, which check_components
    checked before anything was declared. Not for programs of one's own: their args are checked at
    the boundary."""

    def __init__(self, raw: Mapping[str, Any], spec: SpecT) -> None:
        super().__init__(raw)
        # The spec as checked, with the raw args' Outputs where the check saw them unknown.
        self.spec: SpecT = with_outputs(spec, raw) if isinstance(spec, BaseModel) else spec


class GkeGpuComponent(pulumi.ComponentResource, Generic[SpecT]):
    """Base of gke-gpu's components (not itself a component: it has no type token)."""

    # The pydantic model of the args, its cross-field rules, and whether the model's fields carry
    # camelCase aliases (a model shared with the stack file: args are matched by field name).
    _args_model: ClassVar[type[BaseModel]]
    # A staticmethod, so typed: a type checker binds a class attribute typed Callable as a method.
    _args_rules: ClassVar[staticmethod[[Any], list[str]] | None] = None
    # What args that pass the rules leave for the user to check (logged as warnings on the component).
    _args_notes: ClassVar[staticmethod[[Any], list[str]] | None] = None
    _args_by_name: ClassVar[bool] = False
    # The TypedDict callers write; set where the model accepts more keys than the args do.
    _args_type: ClassVar[type | None] = None
    # The args have a `name` that defaults to the resource name.
    _args_name_default: ClassVar[bool] = False

    @classmethod
    def _check(cls, name: str, args: Mapping[str, Any]) -> tuple[SpecT, list[str]]:
        """The checked args and the notes for the user (a subclass with its own check overrides this)."""
        spec = cls._validate(name, args, rules=True)
        return spec, cls._args_notes(spec) if cls._args_notes else []

    @classmethod
    def _validate(cls, name: str, args: Mapping[str, Any], *, rules: bool) -> SpecT:
        """The args checked against `_args_model`, then, with `rules`, against `_args_rules`."""
        validate = validate_named_args if cls._args_name_default else validate_args
        spec = validate(
            cls.__name__,
            name,
            cls._args_model,
            args,
            rules=cls._args_rules if rules else None,
            by_name=cls._args_by_name,
            args_type=cls._args_type,
        )
        return cast(SpecT, spec)

    @classmethod
    def check_args(cls, name: str, args: Any, *, rules: bool = True) -> SpecT:
        """The constructor's check of its args, declaring nothing: the checked args, or an
        InvalidArgsError naming every bad arg.

        `rules=False` checks the args against the model only (each field's type and bounds), not
        `_args_rules`: for the stack layer, whose section rules already ran the same rules (the
        functions a domain shares with the stack file) on the section these args are built from. A
        component with its own `_check` (a GPU pool's) has no such split: the stack layer hands it
        CheckedArgs instead."""
        if isinstance(args, CheckedArgs):
            return cast(SpecT, args.spec)
        if not rules:
            if cls._check.__func__ is not GkeGpuComponent._check.__func__:  # type: ignore[attr-defined]
                raise TypeError(f"{cls.__name__} has its own check: it cannot skip its rules")
            return cls._validate(name, args, rules=False)
        return cls._check(name, args)[0]

    def _given(self, name: str, args: ArgsT, keywords: Mapping[str, Any]) -> ArgsT:
        """The args as given, one `args=` mapping or keyword arguments (pulumi-gcp's two
        conventions): the keywords as a dict, or the mapping. Both at once is refused, naming the
        keywords; neither is an empty dict, so that every required arg is named as missing."""
        if not keywords:
            return cast(ArgsT, {}) if isinstance(args, _NoArgs) else args
        if isinstance(args, _NoArgs):
            return cast(ArgsT, dict(keywords))
        problems = [
            Problem(
                key,
                "given as a keyword and args= given too; give the args either as one args= "
                "mapping or as keywords, not both",
            )
            for key in keywords
        ]
        raise InvalidArgsError(type(self).__name__, name, problems)

    def _begin(self, name: str, args: Any, opts: pulumi.ResourceOptions | None) -> SpecT:
        """Check the args, then register this component; returns the checked args."""
        component = type(self).__name__
        notes: list[str]
        if isinstance(args, CheckedArgs):
            spec, notes = cast(SpecT, args.spec), []
        else:
            spec, notes = self._check(name, args)
        pulumi.ComponentResource.__init__(
            self, component_type(component), name, None, component_options(component, opts)
        )
        report_notes(component, name, notes, resource=self)
        return spec
