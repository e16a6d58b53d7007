"""What a key's value must look like, for a message: read from the pydantic models themselves.

When a mapping or a list is given the wrong type (`replicas: 2`, `reservation: my-res`,
`zones: us-central1-a`), the message names the keys the mapping takes (or the shape of a list's
entries) and one valid value: the value given, put where the shape accepts it, when that validates
(`{min: 2, max: 2}`, `[us-central1-a]`), else the model's own example (`examples` in its
`json_schema_extra`, which `tests/test_shapes.py` validates against the model).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

# pydantic's error kinds for a value of the wrong container type.
CONTAINER_KINDS = frozenset({"dict_type", "model_type", "model_attributes_type", "list_type"})
_SCALAR_NAMES = {str: "string", int: "whole number", float: "number", bool: "true or false"}
_MAX_SUGGESTED = 60  # a longer given value is not repeated in a suggestion


def annotation_at(root: type[BaseModel], loc: Sequence[Any], *, by_name: bool) -> Any:
    """The annotation of the value at `loc` under `root` (a field, a list entry, a mapping value),
    or None when the location leaves the models."""
    current: Any = root
    for part in loc:
        current = _strip(current)
        if isinstance(part, int):
            if get_origin(current) not in (list, tuple):
                return None
            current = get_args(current)[0]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = _field(current, part, by_name=by_name)
            if field is None:
                return None
            current = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
    return current


def _field(model: type[BaseModel], key: Any, *, by_name: bool) -> Any:
    return next((f for n, f in model.model_fields.items() if (n if by_name else (f.alias or n)) == key), None)


def _strip(annotation: Any) -> Any:
    """`Annotated[X, ...]` -> X, `X | None` -> X (when one type is left)."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or type(annotation).__name__ == "UnionType":
            kept = [a for a in get_args(annotation) if a is not type(None)]
            if len(kept) != 1:
                return annotation
            annotation = kept[0]
        else:
            return annotation


def model_example(model: type[BaseModel], *, by_name: bool = False) -> dict[str, Any] | None:
    """The model's first example (stack-file keys), with field names instead where `by_name`."""
    extra: Any = model.model_config.get("json_schema_extra")
    examples: Any = extra.get("examples") if isinstance(extra, Mapping) else None
    if not isinstance(examples, list) or not examples or not isinstance(examples[0], Mapping):
        return None
    first: dict[str, Any] = dict(examples[0])
    return _as_names(model, first) if by_name else first


def _as_names(annotation: Any, value: Any) -> Any:
    """An example written with the stack file's keys, keyed by field names (a component's args)."""
    annotation = _strip(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, Mapping):
        fields = {(f.alias or n): (n, f.annotation) for n, f in annotation.model_fields.items()}
        return {fields[k][0]: _as_names(fields[k][1], v) for k, v in value.items()}
    if get_origin(annotation) in (list, tuple) and isinstance(value, list):
        return [_as_names(get_args(annotation)[0], v) for v in value]
    if get_origin(annotation) is dict and isinstance(value, Mapping):
        return {k: _as_names(get_args(annotation)[1], v) for k, v in value.items()}
    return value


def describe(annotation: Any, *, by_name: bool = False, plural: bool = False) -> str:
    """`a mapping (required keys: name, accelerator; optional: ...)`, `a list of strings`, ..."""
    annotation = _strip(annotation)
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ("mappings " if plural else "a mapping ") + f"({_keys(annotation, by_name=by_name)})"
    if origin in (list, tuple):
        return ("lists of " if plural else "a list of ") + describe(
            get_args(annotation)[0], by_name=by_name, plural=True
        )
    if origin is dict:
        key, value = get_args(annotation)
        return ("mappings of " if plural else "a mapping of ") + (
            f"{describe(key, plural=True)} to {describe(value, by_name=by_name, plural=True)}"
        )
    if origin is Literal:
        return "one of " + ", ".join(str(v) for v in get_args(annotation))
    name = _SCALAR_NAMES.get(annotation, "value")
    if name == "true or false":
        return name
    return f"{name}s" if plural else f"a {name}"


def _keys(model: type[BaseModel], *, by_name: bool) -> str:
    names = {n: (n if by_name else (f.alias or n)) for n, f in model.model_fields.items()}
    required = [names[n] for n, f in model.model_fields.items() if f.is_required()]
    optional = [names[n] for n, f in model.model_fields.items() if not f.is_required()]
    if not required:
        return "keys: " + ", ".join(optional)
    text = "required keys: " + ", ".join(required)
    return text + ("; optional: " + ", ".join(optional) if optional else "")


def expected(annotation: Any, given: Any, *, by_name: bool = False) -> str:
    """What is allowed where `given` was refused: the shape, then one valid value (the value given,
    put where the shape takes it, when that validates; else the model's example)."""
    shape = describe(annotation, by_name=by_name)
    example = suggestion(annotation, given, by_name=by_name)
    return shape if example is None else f"{shape}, such as {_show(example, by_name=by_name)}"


def suggestion(annotation: Any, given: Any, *, by_name: bool = False) -> Any:
    """A valid value of `annotation` built from `given` where one is evident, else an example."""
    annotation = _strip(annotation)
    origin = get_origin(annotation)
    if origin in (list, tuple):
        entry = _strip(get_args(annotation)[0])
        if not isinstance(given, list) and _valid(annotation, [given], by_name=by_name):
            return [given]
        example = suggestion(entry, given, by_name=by_name)
        return None if example is None else [example]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        example = model_example(annotation, by_name=by_name)
        if isinstance(given, list) and len(given) == 1 and _valid(annotation, given[0], by_name=by_name):
            return given[0]  # a mapping written as a one-entry list
        if _is_short_scalar(given) and example is not None:
            filled = _filled(annotation, example, given, by_name=by_name)
            if filled is not None:
                return filled
        return example
    if origin is dict:
        key, value = (_placeholder(a) for a in get_args(annotation))
        return None if key is None or value is None else {"key" if key == "value" else key: value}
    return None


def _placeholder(annotation: Any) -> Any:
    """A value of a scalar type, for the example of a mapping of scalars (`labels`)."""
    return {str: "value", int: 1, float: 1.0, bool: True}.get(_strip(annotation))


def _filled(model: type[BaseModel], example: dict[str, Any], given: Any, *, by_name: bool) -> Any:
    """The example with `given` in the fields it fits: a field whose allowed values hold it (as
    written, or in another case or with `-` for `_`); else the one field that accepts it; else, in a
    model of optional keys only (`{min, max}`), every field that accepts it."""
    names = {n: (n if by_name else (f.alias or n)) for n, f in model.model_fields.items()}
    literal = [
        (names[n], match)
        for n, f in model.model_fields.items()
        if (match := _literal_match(f.annotation, given)) is not None
    ]
    if literal:
        return _checked(model, {**example, **dict(literal)}, by_name=by_name)
    accepting = [key for key in names.values() if _valid(model, {**example, key: given}, by_name=by_name)]
    all_optional = not any(f.is_required() for f in model.model_fields.values())
    if len(accepting) == 1 or (accepting and all_optional):
        return _checked(model, {**example, **dict.fromkeys(accepting, given)}, by_name=by_name)
    return None


def _literal_match(annotation: Any, given: Any) -> Any:
    annotation = _strip(annotation)
    if get_origin(annotation) is not Literal:
        return None
    values = get_args(annotation)
    if given in values and type(given) is not bool:
        return given
    if isinstance(given, str):
        wanted = _loose(given)
        return next((v for v in values if isinstance(v, str) and _loose(v) == wanted), None)
    return None


def _loose(text: str) -> str:
    return re.sub(r"[-_ ]", "", text).lower()


def _checked(model: type[BaseModel], candidate: dict[str, Any], *, by_name: bool) -> dict[str, Any] | None:
    return candidate if _valid(model, candidate, by_name=by_name) else None


def _valid(annotation: Any, value: Any, *, by_name: bool) -> bool:
    try:
        if by_name:
            TypeAdapter(annotation).validate_python(value, by_alias=False, by_name=True)
        else:
            TypeAdapter(annotation).validate_python(value)
    except (ValidationError, TypeError, ValueError):
        return False
    return True


def _is_short_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return 0 < len(value) <= _MAX_SUGGESTED and value.isprintable()
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any, *, by_name: bool) -> str:
    """YAML's flow style for the stack file (`{min: 2, max: 2}`), Python's for a component's args."""
    if by_name:
        return repr(value)
    return str(yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6)).strip()
