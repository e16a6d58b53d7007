"""Messages for pydantic's errors: the key's path, the bad value cut short, and what is allowed.

One wording for the stack file (`gke-gpu:gpuPools[0].gpusPerNode`, camelCase) and for a component's
args (`sharing.max_clients_per_gpu`, snake_case), so both paths say the same thing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .common import NAMESPACE, Problem, cut
from .model import PATTERN_MEANINGS
from .shapes import CONTAINER_KINDS, annotation_at, expected


def format_path(loc: Iterable[Any]) -> str:
    parts = [part if isinstance(part, int) else cut_key(str(part)) for part in loc]
    text = f"{NAMESPACE}:{parts[0]}" if parts else NAMESPACE
    for part in parts[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_./-]{1,40}$")


def cut_key(key: str) -> str:
    """A user-written key as it appears in a message path: plain keys as written, any other (empty,
    spaced, long, control characters) quoted and cut to about 40 characters."""
    return key if _PLAIN_KEY.fullmatch(key) else cut(key, 40)


def _model_at(model: type[BaseModel], loc: Sequence[Any], *, by_name: bool = False) -> type[BaseModel] | None:
    """The pydantic model class found by walking `loc` (aliases, or field names, and list indexes)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        match = _field(current, part, by_name=by_name)
        if match is None:
            return None
        current = _unwrap(match.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field(model: type[BaseModel], key: Any, *, by_name: bool) -> FieldInfo | None:
    """The field a location part names: by its alias (the stack file's key), or by its field name."""
    return next((f for n, f in model.model_fields.items() if (n if by_name else f.alias) == key), None)


def _unwrap(annotation: Any) -> Any:
    """list[X] -> X, X | None -> X (the model class behind a field annotation)."""
    while True:
        args = [a for a in get_args(annotation) if a is not type(None)]
        origin = get_origin(annotation)
        if (origin in (list, tuple) and args) or (origin is not None and len(args) == 1):
            annotation = args[0]
        elif origin is None or not args:
            return annotation
        else:
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            return models[0] if models else annotation


_BOUNDS = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">", "less_than": "<"}


_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping (key: value)",
    "model_type": "a mapping (key: value)",
    "model_attributes_type": "a mapping (key: value)",
}


def describe_pydantic_error(
    error: Mapping[str, Any],
    *,
    root: type[BaseModel],
    path: Callable[[Sequence[Any]], str] | None = None,
    by_name: bool = False,
) -> Problem:
    """One line for one pydantic error: the key's path, the bad value (cut short), what is allowed.

    `root` is the model the error's location starts from. The stack file's keys by default
    (`gke-gpu:gpuPools[0].gpusPerNode`); a component's args with `path` and `by_name`
    (`sharing.max_clients_per_gpu`)."""
    loc = list(error["loc"])
    where = (path or format_path)(loc)
    kind = error["type"]
    value: Any = error.get("input")  # whatever the caller gave: a too_long error's input is sized
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1], by_name=by_name)
        names = parent.model_fields.items() if parent else []
        allowed = sorted(n if by_name else (f.alias or n) for n, f in names)
        return Problem(where, f"unknown key; allowed keys here: {', '.join(allowed)}")
    if kind == "missing":
        return Problem(where, "required")
    if kind == "literal_error":
        return Problem(where, f"{cut(value)} is not allowed; allowed: {ctx['expected']}")
    if kind in _BOUNDS:
        limit = next(iter(ctx.values()))
        return Problem(where, f"{cut(value)} is not allowed; must be {_BOUNDS[kind]} {limit}")
    if kind == "string_pattern_mismatch":
        meaning = PATTERN_MEANINGS.get(ctx.get("pattern", ""), "the expected format")
        return Problem(where, f"{cut(value)} is not allowed; expected {meaning}")
    if kind == "string_too_short" and isinstance(value, str) and not value.strip():
        # An empty name is a mistake, not "unset": an optional key is unset by leaving it out.
        parent = _model_at(root, loc[:-1], by_name=by_name)
        field = _field(parent, loc[-1], by_name=by_name) if parent else None
        unset = (
            " (to leave it unset, leave the key out)" if field is not None and not field.is_required() else ""
        )
        return Problem(where, f"{cut(value)} is not allowed; it cannot be empty{unset}")
    if kind == "string_too_long":
        return Problem(where, f"{cut(value, 40)} is too long; at most {ctx.get('max_length')} characters")
    if kind == "too_long":
        return Problem(where, f"has {len(value)} entries; at most {ctx.get('max_length')}")
    if kind in CONTAINER_KINDS and (shape := annotation_at(root, loc, by_name=by_name)) is not None:
        return Problem(
            where, f"{cut(value)} is not allowed; expected {expected(shape, value, by_name=by_name)}"
        )
    if kind in _TYPE_NAMES:
        return Problem(where, f"{cut(value)} is not allowed; expected {_TYPE_NAMES[kind]}")
    return Problem(where, f"{cut(value)} is not allowed: {error['msg']}")
