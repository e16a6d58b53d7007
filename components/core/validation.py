"""Validation at a component's boundary: the args dict checked before any child is declared.

Every public component reads its args as a dict (a ``TypedDict``): the same code path serves Python
programs that import the library and the multi-language provider, which always hands the
constructor a dict with snake_case keys. ``validate_args`` checks that dict against a pydantic
model of the component (unknown keys refused, values strict) and raises one
:class:`InvalidArgsError` naming every bad arg, before the component declares anything.

Two facts of the wire shape the checks:

* Integers arrive as floats through the provider (protobuf ``Struct`` numbers): ``2.0`` is taken as
  ``2``; ``2.5`` stays a float and is refused where a whole number is expected.
* Values may be Outputs (``pulumi.Input[T]``). They are unknown at construction time, so a field
  that only forwards a value accepts an Output (``Deferred``); a field the component branches on
  (it decides which resources exist) is plain and checked here.
"""

import enum
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, TypeVar

import pulumi
from pydantic import BaseModel, ConfigDict, ValidationError, ValidatorFunctionWrapHandler, WrapValidator

from .common import Problem, cut
from .credentials import redact
from .messages import cut_key, describe_pydantic_error

M = TypeVar("M", bound=BaseModel)


class InvalidArgsError(pulumi.InputPropertiesError, pulumi.RunError, ValueError):
    """A component's args are invalid. It is the SDK's `InputPropertiesError`, with one
    `InputPropertyErrorDetails(property_path, reason)` per problem, so the engine shows a component
    built through the multi-language provider the way it shows a provider's bad inputs; a RunError,
    so the CLI prints the message only; and a ValueError for programs that catch it."""

    def __init__(self, component: str, name: str, problems: Sequence[str]) -> None:
        self.component = component
        self.resource_name = name
        self.problems = [redact(p) for p in problems]
        lines = "\n".join(f"  - {p}" for p in self.problems)
        message = (
            f"{component} {redact(repr(name))}: invalid args ({len(self.problems)} problem(s)):\n{lines}"
        )
        super().__init__(message, [_details(problem) for problem in self.problems])

    def __reduce__(self) -> tuple[type, tuple[str, str, list[str]]]:
        # An exception pickles as cls(*self.args), and args is the message here: rebuild from the parts.
        return type(self), (self.component, self.resource_name, self.problems)


def _details(problem: str) -> pulumi.InputPropertyErrorDetails:
    """A Problem's path and reason, as they were reported. A plain line (no path kept) is about the
    args as a whole: its text is the reason (a line is never split: a path may hold ": ")."""
    if isinstance(problem, Problem):
        return {"property_path": problem.path, "reason": problem.reason}
    return {"property_path": "", "reason": problem}


class Unknown:
    """Stands in for an Output (or any awaitable) while the args are validated."""

    def __repr__(self) -> str:
        return "<output>"


UNKNOWN = Unknown()
T = TypeVar("T")


def _keep_unknown(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    return value if isinstance(value, Unknown) else handler(value)


# A field that may be an Output (`Deferrable[str]`): an Output passes unchecked, a value is checked.
Deferrable = Annotated[T, WrapValidator(_keep_unknown)]


class ArgsModel(BaseModel):
    """Base of the pydantic models that check a component's args (snake_case keys, as the TypedDict)."""

    # defer_build: each model builds its validator on first use, not at import (a render uses some).
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, arbitrary_types_allowed=True, defer_build=True
    )


def known(value: Any) -> Any:
    """Args as plain data: Outputs and awaitables become UNKNOWN; integral floats become ints."""
    if isinstance(value, pulumi.Output) or inspect.isawaitable(value):
        return UNKNOWN
    if isinstance(value, Mapping):
        return {k: known(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [known(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, enum.Enum):
        return value.value  # the wire value (the provider decodes schema enums into members)
    return value


def arg_path(loc: Sequence[Any]) -> str:
    """`('sharing', 'max_clients_per_gpu')` -> `sharing.max_clients_per_gpu`; list indexes in brackets;
    a key that is not plain (empty, spaced, long) quoted and cut short."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = cut_key(str(part))
            text += f".{key}" if text else key
    return text


def describe_args_error(error: Mapping[str, Any], model: type[BaseModel]) -> str:
    """One line for one pydantic error, keyed by the arg's path (snake_case, as the TypedDict)."""
    return describe_pydantic_error(error, root=model, path=arg_path, by_name=True)


def validate_args(
    component: str,
    name: str,
    model: type[M],
    args: Mapping[str, Any] | None,
    *,
    rules: Callable[[M], list[str]] | None = None,
    by_name: bool = False,
    args_type: type | None = None,
) -> M:
    """Check `args` against `model`, then `rules` (cross-field and catalog checks that return
    problem lines); raise one InvalidArgsError with every problem, or return the validated model.

    `args_type`, the component's TypedDict, is what a caller may write: a key outside it is unknown
    even where the model (shared with the stack file) has a field of that name."""
    if args is None or not isinstance(args, Mapping):
        raise InvalidArgsError(
            component, name, [Problem("args", f"{cut(args)} is not allowed; expected a dict")]
        )
    unknown: list[str] = []
    if args_type is not None:
        allowed = sorted(args_type.__required_keys__ | args_type.__optional_keys__)  # type: ignore[attr-defined]
        extra = [key for key in args if key not in allowed]
        unknown = [
            Problem(arg_path([key]), f"unknown key; allowed keys here: {', '.join(allowed)}") for key in extra
        ]
        args = {key: value for key, value in args.items() if key in allowed}
    try:
        if by_name:  # a model whose fields also have camelCase aliases (the stack file's): args use names
            spec = model.model_validate(known(args), by_alias=False, by_name=True)
        else:
            spec = model.model_validate(known(args))
    except ValidationError as exc:
        lines = [describe_args_error(e, model) for e in exc.errors()]
        raise InvalidArgsError(component, name, _unique([*unknown, *lines])) from None
    if unknown:
        raise InvalidArgsError(component, name, unknown)
    problems = rules(spec) if rules else []
    if problems:
        raise InvalidArgsError(component, name, problems)
    return spec


# True while the stack program declares its components: it has reported every note of its stack file
# already (keyed by the stack file's paths), so components do not repeat them.
_NOTES_REPORTED_BY_STACK: ContextVar[bool] = ContextVar("notes_reported_by_stack", default=False)


@contextmanager
def stack_notes_reported() -> Iterator[None]:
    """Within this block, components leave their notes to the stack program, which reported them."""
    token = _NOTES_REPORTED_BY_STACK.set(True)
    try:
        yield
    finally:
        _NOTES_REPORTED_BY_STACK.reset(token)


def validate_named_args(
    component: str,
    name: str,
    model: type[M],
    args: Mapping[str, Any] | None,
    **options: Any,
) -> M:
    """validate_args for args whose `name` defaults to the resource name: a problem with a name the
    caller never wrote says it is that default."""
    given = {"name": name, **args} if isinstance(args, Mapping) else args
    try:
        return validate_args(component, name, model, given, **options)
    except InvalidArgsError as exc:
        if not (isinstance(args, Mapping) and "name" not in args):
            raise
        problems = [_name_defaulted(p) for p in exc.problems]
        raise InvalidArgsError(component, name, problems) from None


def _name_defaulted(problem: str) -> str:
    """A problem with `name`, which the caller left to default to the resource name, says so."""
    if not (isinstance(problem, Problem) and problem.path == "name"):
        return problem
    return Problem("name", problem.reason, f"name (default: the resource name): {problem.reason}")


NOTE, WARNING = "note: ", "warning: "


def log_message(message: str, *, where: str = "", resource: pulumi.Resource | None = None) -> None:
    """Send a rule's message to the engine on the channel of its kind, with one kind prefix: a
    "note: ..." (what the user may want to check) goes out as info, anything else (a "warning: ..."
    or an unmarked message) as a warning. The engine prints the kind itself ("warning: ..."), so the
    text loses its own prefix; `where` (a component and its name) goes in front of the text."""
    prefix = f"{where}: " if where else ""
    if message.startswith(NOTE):
        pulumi.log.info(prefix + message.removeprefix(NOTE), resource=resource)
    else:
        pulumi.log.warn(prefix + message.removeprefix(WARNING), resource=resource)


def report_notes(component: str, name: str, notes: Sequence[str], *, resource: pulumi.Resource) -> None:
    """Log a component's notes (what its args leave for the user to check) on it, each on the
    channel of its kind (`log_message`)."""
    if _NOTES_REPORTED_BY_STACK.get():
        return
    for note in notes:
        log_message(note, where=f"{component} {name!r}", resource=resource)


def pick(checked: Any, raw: Any) -> Any:
    """The validated value, or the raw Output where validation saw only UNKNOWN."""
    return raw if isinstance(checked, Unknown) else checked


def _unique(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))
