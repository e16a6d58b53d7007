"""Evaluate a CRD schema's CEL validation rules (`x-kubernetes-validations`) over an object the way the
API server does when the object is created, with the CEL engine the admission tests use
(`common-expression-language`). What the API server does is read from its source at the version GKE's
1.34 runs (kubernetes/apiextensions-apiserver and kubernetes/apiserver, tag v0.34.10):

- the object is defaulted first, from the schema's `default`s (schema/defaulting/algorithm.go; the
  decoder calls it, customresource_handler.go), so a rule may read a defaulted field without has();
- a rule runs at its own schema node with `self` bound to the value there, for every element of an
  array and every value of an additionalProperties map; a node whose value is absent or null is not
  validated (schema/cel/validation.go, validateExpressions);
- a rule that reads `oldSelf` is a transition rule: skipped at create, where there is no old object,
  unless it sets optionalOldSelf (validation.go again);
- an evaluation error fails the object, as does any result but `true`;
- `self` is typed by the schema (pkg/cel/common/valuesunstructured.go): declared properties only, under
  escaped names (pkg/cel/escaping.go: `namespace` reads `__namespace__`); additionalProperties maps keep
  their keys; `number` is a double; `date`/`date-time` strings are timestamps; at the resource root,
  metadata shows only name and generateName (schema/cel/model/schemas.go, WithTypeAndObjectMeta).

A rule the engine cannot evaluate (a function of Kubernetes' CEL libraries it lacks, such as quantity(),
isSorted(), url(), ip(), cel.bind(); syntax it cannot parse; a value it is not given faithfully) is
reported with the reason, never counted as passing. Not modelled: the cost limits, and the
order-insensitive equality of `x-kubernetes-list-type: set/map` lists (no rule evaluated here compares
two such lists)."""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import cel
from cel import stdlib

# What the engine evaluates natively (its own module docstring, cel/stdlib.py of 0.10.0, and the tests
# in tests/test_crd_cel.py): operators as the compiler names them, the core functions and conversions.
_NATIVE = frozenset(
    {
        "!_", "-_", "@in", "@not_strictly_false", "_!=_", "_%_", "_&&_", "_*_", "_+_", "_-_", "_/_",
        "_<=_", "_<_", "_==_", "_>=_", "_>_", "_?_:_", "_[_]", "_||_",
        "size", "contains", "startsWith", "endsWith", "matches",
        "dyn", "int", "uint", "double", "string", "bytes", "timestamp", "duration",
    }
)  # fmt: skip
# cel-go's strings extension (version 2 in Kubernetes 1.29+, environment/base.go), as the engine's own
# optional library implements it; each is checked against cel-go's documented examples in the tests.
LIBRARY: Mapping[str, Callable[..., Any]] = {
    "charAt": stdlib.char_at,
    "join": stdlib.join,
    "lowerAscii": stdlib.lower_ascii,
    "replace": stdlib.replace,
    "split": stdlib.split,
    "substring": stdlib.substring,
    "trim": stdlib.trim,
    "upperAscii": stdlib.upper_ascii,
}
# The CEL lexer's reserved words, escaped as `__word__` (pkg/cel/escaping.go).
_RESERVED = frozenset(
    {
        "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
        "import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
    }
)  # fmt: skip
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
# Formats whose strings the API server hands CEL as another type this module does not convert.
_UNCONVERTED_FORMATS = frozenset({"duration", "byte"})


def escape(name: str) -> str | None:
    """A property name as CEL reads it, or None where Kubernetes makes it unreadable."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if not re.fullmatch(r"[a-zA-Z0-9_./-]+", name):
        return None
    return re.sub(r"__|[./-]", lambda m: _ESCAPES[m.group(0)], name)


@dataclass(frozen=True)
class Rule:
    source: str  # the schema file
    path: str  # the schema node, e.g. `.spec.listeners[]`
    rule: str
    message: str
    program: cel.Program | None
    # Why the rule is not evaluated at create: "transition" (reads oldSelf), or "unevaluable: ...".
    skip: str | None


@dataclass
class _Node:
    schema: Mapping[str, Any]
    rules: tuple[Rule, ...] = ()
    properties: dict[str, _Node] = field(default_factory=dict)
    items: _Node | None = None
    additional: _Node | None = None


@cache
def _compiled(source: str, path: str, spec: tuple[tuple[str, Any], ...], formats: frozenset[str]) -> Rule:
    rule = dict(spec)
    text, message = rule["rule"], rule.get("message") or f"failed rule: {rule['rule']}"
    try:
        program = cel.compile(text)
    except Exception as error:  # the engine's parser lacks some syntax (e.g. optional field `.?`)
        return Rule(source, path, text, message, None, f"unevaluable: the engine cannot parse it ({error})")
    missing = sorted(f for f in program.functions() if f not in _NATIVE and f not in LIBRARY)
    uses_old_self = "oldSelf" in program.variables()
    if missing:
        skip: str | None = f"unevaluable: the engine lacks {', '.join(missing)}"
    elif uses_old_self and rule.get("optionalOldSelf"):
        skip = "unevaluable: optionalOldSelf (oldSelf as an optional at create)"
    elif uses_old_self:
        skip = "transition"
    elif formats & _UNCONVERTED_FORMATS:
        skip = f"unevaluable: reads strings of format {', '.join(sorted(formats & _UNCONVERTED_FORMATS))}"
    else:
        skip = None
    return Rule(source, path, text, message, program, skip)


def _formats(schema: Mapping[str, Any]) -> frozenset[str]:
    """Every string format in a schema node and below it."""
    found = {schema["format"]} if isinstance(schema.get("format"), str) else set()
    for child in _children(schema):
        found |= _formats(child)
    return frozenset(found)


def _children(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    children = list(schema.get("properties", {}).values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            children.append(schema[key])
    return children


def _build(schema: Mapping[str, Any], source: str, path: str) -> _Node:
    rules = tuple(
        _compiled(source, path, tuple(sorted(r.items())), _formats(schema))
        for r in schema.get("x-kubernetes-validations", [])
    )
    if has_rules(schema.get("allOf", [])):
        rules += (Rule(source, path, "(rules under allOf)", "", None, "unevaluable: rules under allOf"),)
    node = _Node(schema, rules)
    node.properties = {
        name: _build(child, source, f"{path}.{name}") for name, child in schema.get("properties", {}).items()
    }
    if isinstance(schema.get("items"), dict):
        node.items = _build(schema["items"], source, f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        node.additional = _build(schema["additionalProperties"], source, f"{path}{{}}")
    return node


def has_rules(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "x-kubernetes-validations" in schema or any(has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False


def compile_schema(schema: Mapping[str, Any], source: str) -> _Node:
    """A resource's schema with its rules compiled (`source` names the file in reports)."""
    return _build(schema, source, "")


def rules(node: _Node) -> list[Rule]:
    """Every rule of a compiled schema, in schema order."""
    found = list(node.rules)
    for child in [*node.properties.values(), node.items, node.additional]:
        if child is not None:
            found += rules(child)
    return found


def default(value: Any, schema: Mapping[str, Any]) -> None:
    """Apply the schema's defaults in place, as structural defaulting does (a default is itself
    defaulted below; a null where the schema is not nullable takes the default)."""
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name, child in properties.items():
            if "default" in child and (name not in value or _non_nullable_null(value[name], child)):
                value[name] = copy.deepcopy(child["default"])
        additional = schema.get("additionalProperties")
        for name in value:
            if name in properties:
                default(value[name], properties[name])
            elif isinstance(additional, dict):
                if _non_nullable_null(value[name], additional) and "default" in additional:
                    value[name] = copy.deepcopy(additional["default"])
                default(value[name], additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        for i, item in enumerate(value):
            if _non_nullable_null(item, items) and "default" in items:
                value[i] = copy.deepcopy(items["default"])
            default(value[i], items)


def _non_nullable_null(value: Any, schema: Mapping[str, Any]) -> bool:
    return value is None and not schema.get("nullable", False)


@dataclass
class Outcome:
    failures: list[str] = field(default_factory=list)
    evaluated: int = 0
    skipped: list[Rule] = field(default_factory=list)


def evaluate(obj: Mapping[str, Any], node: _Node) -> Outcome:
    """Every rule of `node` (a resource root's compiled schema) over a defaulted copy of `obj`."""
    outcome = Outcome()
    defaulted = copy.deepcopy(dict(obj))
    default(defaulted, node.schema)
    _walk(node, defaulted, "", outcome, root=True)
    return outcome


def _walk(node: _Node, raw: Any, where: str, outcome: Outcome, *, root: bool = False) -> Any:
    """The CEL value of `raw` under `node`, its rules and its children's evaluated on the way."""
    if raw is None:
        return None
    value = _value(node, raw, where, outcome, root=root)
    runnable = [r for r in node.rules if r.skip is None]
    outcome.skipped += [r for r in node.rules if r.skip is not None]
    if runnable:
        context = cel.Context(variables={"self": value}, functions=dict(LIBRARY))
        for rule in runnable:
            assert rule.program is not None
            outcome.evaluated += 1
            try:
                result = rule.program.execute(context)
            except Exception as error:  # the API server fails the object on an evaluation error
                outcome.failures.append(f"{where or '<root>'}: {error} evaluating rule: {rule.rule}")
                continue
            if result is not True:
                outcome.failures.append(f"{where or '<root>'}: {rule.message}")
    return value


def _value(node: _Node, raw: Any, where: str, outcome: Outcome, *, root: bool) -> Any:
    schema = node.schema
    if schema.get("x-kubernetes-int-or-string"):
        return raw
    kind = schema.get("type")
    if isinstance(raw, dict) and (node.properties or root or schema.get("x-kubernetes-embedded-resource")):
        value: dict[str, Any] = {}
        for name, child in raw.items():
            escaped = escape(name)
            if name in node.properties and escaped is not None:
                value[escaped] = _walk(node.properties[name], child, f"{where}.{name}", outcome)
        if root or schema.get("x-kubernetes-embedded-resource"):
            for name in ("apiVersion", "kind"):
                if isinstance(raw.get(name), str):
                    value[name] = raw[name]
            metadata = raw.get("metadata") or {}
            value["metadata"] = {k: metadata[k] for k in ("name", "generateName") if k in metadata}
        return value
    if isinstance(raw, dict) and node.additional is not None:
        return {k: _walk(node.additional, v, f"{where}[{k!r}]", outcome) for k, v in raw.items()}
    if isinstance(raw, dict):
        return {}  # no properties, no additionalProperties schema: CEL reads no key of it
    if isinstance(raw, list) and node.items is not None:
        return [_walk(node.items, item, f"{where}[{i}]", outcome) for i, item in enumerate(raw)]
    if kind == "number" and isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if kind == "integer" and isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if kind == "string" and schema.get("format") in ("date", "date-time") and isinstance(raw, str):
        return datetime.datetime.fromisoformat(raw)
    return raw
