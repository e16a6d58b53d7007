"""Read `Pulumi.<stack>.yaml` as the Pulumi engine does, with bounds, and never crash on bad input.

The engine (Go) reads a stack file's ``config:`` into ``namespace:key`` -> string: a scalar as the
text written, a ``{secure: ...}`` value as a secret, anything else as JSON. PyYAML alone is not a
safe stand-in: it keeps the last of two duplicate keys, builds dates, bytes and sets the engine has
no use for, recurses until ``RecursionError`` on deep nesting, and expands alias bombs forever.

`load_stack_file` therefore builds the document from PyYAML's event stream itself (no recursion, no
Python object construction) and refuses, with ``Pulumi.<stack>.yaml:LINE: what is wrong``:

* a file over `MAX_FILE_BYTES`, bytes that are not UTF-8, YAML syntax errors (tabs included);
* more than one document, a document that is not a mapping, unknown top-level keys, a ``config:``
  that is not a mapping, config keys without a namespace;
* keys that are not strings, duplicate keys (the engine refuses them too);
* values that are not JSON types (dates, ``!!binary``, ``!!set``, ``!!omap``, any other tag, NaN,
  Infinity, integers beyond 64 bits);
* nesting deeper than `MAX_DEPTH` and more than `MAX_NODES` values once aliases are expanded.

`config_value.decode_config_value` is the program's side of the same contract: the engine's string
for one key, decoded as JSON with the same bounds (``json.loads`` recurses too), or the string itself.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .yaml_composer import (
    ENGINE_TYPES,
    INT64,
    JSON_SCALARS,
    MAX_DEPTH,
    MAX_EXPANDED_CHARS,
    MAX_FILE_BYTES,
    MAX_NODES,
    MAX_VALUE_CHARS,
    SECRET_NOT_DECRYPTED,
    STACK_KEYS,
    TAG,
    YAML_TYPES,
    Composer,
    Node,
    StackFileError,
    clip,
    cut,
    key_text,
    scalar_kind,
)

# What the stack layer and the tools read from here (the limits and the error are the composer's).
__all__ = [
    "MAX_DEPTH",
    "MAX_EXPANDED_CHARS",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "MAX_VALUE_CHARS",
    "SECRET_NOT_DECRYPTED",
    "StackFile",
    "StackFileError",
    "clip",
    "cut",
    "load_stack_file",
    "parse_stack_text",
]


@dataclass
class StackFile:
    """A stack file's config as the engine passes it to the program."""

    config: dict[str, str]
    secret_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)  # (line, node) per top-level key


class _Converter:
    """`Node` graph -> JSON-typed Python values, refusing what the engine cannot carry."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.constructor = yaml.constructor.SafeConstructor()

    def error(self, node: Node, path: str, problem: str) -> StackFileError:
        return StackFileError.at(self.name, node.line, f"{clip(path)}: {problem}")

    def plain(self, node: Node, path: str) -> Any:
        if node.kind == "map":
            return {
                key: self.plain(child, f"{path}.{key_text(key)}") for key, (_, child) in node.value.items()
            }
        if node.kind == "seq":
            return [self.plain(child, f"{path}[{i}]") for i, child in enumerate(node.value)]
        return self.scalar(node, path)

    def scalar(self, node: Node, path: str) -> Any:
        tag, text = node.tag, node.value
        if tag in YAML_TYPES or tag not in JSON_SCALARS:
            what = YAML_TYPES.get(tag, f"a value tagged {tag.replace(TAG, '!!')}")
            hint = "; quote it if you mean the text" if tag == f"{TAG}timestamp" else ""
            raise self.error(node, path, f"{cut(text)} is {what}; {ENGINE_TYPES}{hint}")
        if tag == f"{TAG}str":
            return text
        if tag == f"{TAG}int" and len(text.replace("_", "")) > 70:
            raise self.error(node, path, f"{cut(text)}: an integer beyond 64 bits")
        try:
            value = self.constructor.construct_object(yaml.ScalarNode(tag, text), deep=True)
        except (yaml.YAMLError, ValueError, TypeError, KeyError):
            raise self.error(node, path, f"{cut(text)} is not a valid {scalar_kind(tag)}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(
                node,
                path,
                f"{cut(text)} is not a finite number; JSON (and so the engine) has no NaN or Infinity",
            )
        if isinstance(value, int) and not isinstance(value, bool) and not -INT64 <= value < INT64:
            raise self.error(node, path, f"{cut(text)}: an integer beyond 64 bits")
        return value

    def engine_value(self, key: str, node: Node) -> tuple[str, bool]:
        """One config entry as the engine passes it: (string, is secret)."""
        if node.kind == "scalar":
            if node.tag not in JSON_SCALARS and node.tag != f"{TAG}timestamp":
                self.scalar(node, key_text(key))  # raises: an explicit tag the engine cannot take
            # The engine keeps a scalar's text as written (`0x10` stays "0x10"); null is empty.
            return ("" if node.tag == f"{TAG}null" else node.value), False
        value = self.plain(node, key_text(key))
        if _is_secure(value):
            return SECRET_NOT_DECRYPTED, True
        value, secret = _strip_secure(value)
        return json.dumps(value), secret


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("secure"), str)


def _strip_secure(value: Any) -> tuple[Any, bool]:
    if _is_secure(value):
        return SECRET_NOT_DECRYPTED, True
    if isinstance(value, dict):
        items = {k: _strip_secure(v) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(s for _, s in items.values())
    if isinstance(value, list):
        pairs = [_strip_secure(v) for v in value]
        return [v for v, _ in pairs], any(s for _, s in pairs)
    return value, False


def _yaml_problem(exc: yaml.YAMLError, text: str) -> tuple[int | None, str]:
    line: int | None
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        char = chr(exc.character) if isinstance(exc.character, int) else str(exc.character)
        return line, f"the character {char!r} (U+{ord(char[:1] or ' '):04X}) is not allowed in YAML"
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None and context_mark.line + 1 != line:
        context = f"{context} (line {context_mark.line + 1})"
    lines = text.splitlines()
    source = lines[line - 1] if line and line <= len(lines) else ""
    indent = source[: len(source) - len(source.lstrip())]
    if "'\\t'" in problem or "\t" in indent:
        return line, "a tab character where YAML expects spaces: indent with spaces only"
    detail = f"{context}, {problem}" if context else problem
    shown = f" (line {line}: {cut(source.strip())})" if source.strip() else ""
    return line, f"YAML syntax: {detail}{shown}"


def parse_stack_text(text: str, name: str) -> StackFile:
    """A stack file's text (already decoded) -> its config; raises StackFileError."""
    composer = Composer(name)
    try:
        root = composer.compose(text)
    except yaml.YAMLError as exc:
        line, problem = _yaml_problem(exc, text)
        raise StackFileError.at(name, line, problem) from None
    if root is None:
        return StackFile({})
    if root.kind != "map":
        shape = "a list" if root.kind == "seq" else f"the scalar {cut(root.value)}"
        raise StackFileError.at(
            name, root.line, f"the document is {shape}; a stack file is a map with a `config:` key"
        )
    notes: list[str] = []
    for key, (line, _) in root.value.items():
        if key not in STACK_KEYS:
            raise StackFileError.at(
                name, line, f"unknown top-level key {cut(key)}; a stack file has: {', '.join(STACK_KEYS)}"
            )
    if "environment" in root.value:
        notes.append(
            f"{name}: `environment` (Pulumi ESC) is not read offline: its config is not in this render"
        )
    result = StackFile({}, notes=notes, top_level=dict(root.value))
    config = root.value.get("config", (None, None))[1]
    if config is None or (config.kind == "scalar" and config.tag == f"{TAG}null"):
        return result
    if config.kind != "map":
        shape = "a list" if config.kind == "seq" else f"the scalar {cut(config.value)}"
        raise StackFileError.at(
            name, config.line, f"config is {shape}; it must be a map of `namespace:key: value`"
        )
    converter = _Converter(name)
    for key, (key_line, node) in config.value.items():
        namespace, colon, rest = key.partition(":")
        if not colon or not namespace.strip() or not rest.strip():
            raise StackFileError.at(
                name,
                key_line,
                f"config key {cut(key)} is not `<namespace>:<name>`, as the Pulumi CLI requires (this "
                "program's settings are gke-gpu:<name>, the GCP provider's gcp:<name>)",
            )
        text_value, secret = converter.engine_value(key, node)
        result.config[key] = text_value
        if secret:
            result.secret_keys.append(key)
    return result


def load_stack_file(path: Path) -> StackFile:
    """Read and check a `Pulumi.<stack>.yaml`; raises StackFileError (FileNotFoundError if absent)."""
    name = path.name
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StackFileError.at(name, None, f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        line = data.count(b"\n", 0, MAX_FILE_BYTES) + 1
        size = path.stat().st_size
        raise StackFileError.at(
            name,
            line,
            f"the file passes {MAX_FILE_BYTES:,} bytes here (it has {size:,}); a stack file may have "
            f"at most {MAX_FILE_BYTES:,}",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise StackFileError.at(
            name,
            line,
            f"byte 0x{data[exc.start]:02x} at column {column} is not UTF-8; save the file as UTF-8",
        ) from None
    return parse_stack_text(text, name)
