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
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from yaml import events

from ..core.credentials import redact

MAX_FILE_BYTES = 1024 * 1024
MAX_VALUE_CHARS = MAX_FILE_BYTES
MAX_DEPTH = 32
MAX_NODES = 10_000
# Characters of scalar text once aliases are expanded (guards the JSON the engine would build).
MAX_EXPANDED_CHARS = 4 * MAX_FILE_BYTES
SECRET_NOT_DECRYPTED = "[secret: not decrypted offline]"
# The top-level keys of a stack file (Pulumi's ProjectStack).
STACK_KEYS = ("config", "environment", "secretsprovider", "encryptedkey", "encryptionsalt")
_INT64 = 2**63
_SHOWN = 80

_TAG = "tag:yaml.org,2002:"
_JSON_SCALARS = {f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null")}
_YAML_TYPES = {
    f"{_TAG}timestamp": "a date or time",
    f"{_TAG}binary": "binary data (!!binary)",
    f"{_TAG}set": "a set (!!set)",
    f"{_TAG}omap": "an ordered map (!!omap)",
    f"{_TAG}pairs": "a list of pairs (!!pairs)",
}
_ENGINE_TYPES = "the Pulumi engine takes strings, numbers, booleans, null, lists and maps only"


class StackFileError(pulumi.RunError):
    """A stack file (or an engine config value) that cannot be read; the message says where and why.

    A `pulumi.RunError`, so the Pulumi CLI prints the message without a Python stack trace.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(redact(message))
        self.path = path
        self.line = line

    @classmethod
    def at(cls, name: str, line: int | None, problem: str) -> StackFileError:
        where = f"{name}:{line}" if line is not None else name
        return cls(f"{where}: {problem}", path=name, line=line)


@dataclass
class StackFile:
    """A stack file's config as the engine passes it to the program."""

    config: dict[str, str]
    secret_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)  # (line, node) per top-level key


def cut(value: Any, limit: int = _SHOWN) -> str:
    """`repr` of a value, cut to about `limit` characters."""
    return _clip(repr(value), limit)


def _clip(text: str, limit: int = _SHOWN) -> str:
    return text if len(text := redact(text[:16384]) + text[16384:]) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------------
# The stack file.


@dataclass(eq=False)
class _Node:
    kind: str  # "scalar" | "seq" | "map"
    line: int
    tag: str
    value: Any = None  # scalar: its text; seq: list of nodes; map: {key: (key line, node)}
    plain: bool = False  # a plain (unquoted) scalar
    size: int = 1  # values once aliases are expanded
    chars: int = 0
    height: int = 1


@dataclass
class _Frame:
    node: _Node
    anchor: str | None
    path: str
    depth: int
    key: tuple[str | None, int] | None = None  # the key whose value comes next; None: a merge (<<)
    merges: list[_Node] = field(default_factory=list)


class _Composer:
    """The document as a graph of `_Node` (aliases share nodes), built without recursion."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.resolver = yaml.resolver.Resolver()
        self.anchors: dict[str, _Node] = {}
        self.building: set[str] = set()
        self.stack: list[_Frame] = []
        self.root: _Node | None = None
        self.documents = 0
        self.nodes = 0
        self.chars = 0

    def error(self, line: int | None, problem: str) -> StackFileError:
        return StackFileError.at(self.name, line, problem)

    def compose(self, text: str) -> _Node | None:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, events.DocumentStartEvent):
                self.documents += 1
                if self.documents > 1:
                    raise self.error(line, "a second YAML document (after ---); a stack file is one document")
            elif isinstance(event, events.AliasEvent):
                self._alias(event, line or 0)
            elif isinstance(event, events.ScalarEvent):
                self._scalar(event, line or 0)
            elif isinstance(event, (events.SequenceStartEvent, events.MappingStartEvent)):
                self._start(event, line or 0)
            elif isinstance(event, (events.SequenceEndEvent, events.MappingEndEvent)):
                self._end()
        return self.root

    # -- events -----------------------------------------------------------------------------------

    def _path(self) -> str:
        if not self.stack:
            return "the document"
        frame = self.stack[-1]
        if frame.node.kind == "seq":
            return f"{frame.path}[{len(frame.node.value)}]"
        if frame.key is None:
            return f"a key of {frame.path}" if frame.path else "a top-level key"
        return _join(frame, "<<" if frame.key[0] is None else frame.key[0])

    def _count(self, nodes: int, chars: int, line: int, what: str) -> None:
        self.nodes += nodes
        self.chars += chars
        if self.nodes > MAX_NODES:
            raise self.error(
                line,
                f"{_clip(self._path())}: {what} makes the file hold more than {MAX_NODES:,} values "
                "(an alias counts as every value it repeats); a stack file may hold at most that",
            )
        if self.chars > MAX_EXPANDED_CHARS:
            raise self.error(
                line,
                f"{_clip(self._path())}: {what} makes the file's values exceed {MAX_EXPANDED_CHARS:,} "
                "characters (an alias counts as every value it repeats)",
            )

    def _depth_check(self, line: int, height: int) -> None:
        if len(self.stack) + height > MAX_DEPTH:
            raise self.error(line, f"{_clip(self._path())}: nested deeper than {MAX_DEPTH} levels")

    def _anchor(self, anchor: str | None, line: int) -> None:
        if anchor is not None and anchor in self.building:
            raise self.error(line, f"anchor &{anchor} is defined again inside itself")

    def _scalar(self, event: events.ScalarEvent, line: int) -> None:
        self._anchor(event.anchor, line)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = _Node("scalar", line, tag, event.value, plain=event.style is None, chars=len(event.value))
        self._count(1, node.chars, line, "this value")
        self._depth_check(line, 1)
        if event.anchor is not None:
            self.anchors[event.anchor] = node
        self._add(node, line)

    def _alias(self, event: events.AliasEvent, line: int) -> None:
        anchor = event.anchor
        assert anchor is not None, "PyYAML's parser names the anchor of every alias"
        if anchor in self.building:
            raise self.error(line, f"{_clip(self._path())}: alias *{anchor} is used inside its own anchor")
        node = self.anchors.get(anchor)
        if node is None:
            raise self.error(
                line, f"{_clip(self._path())}: alias *{anchor} has no anchor &{anchor} before it"
            )
        self._count(node.size, node.chars, line, f"alias *{anchor}")
        self._depth_check(line, node.height)
        self._add(node, line)

    def _start(self, event: events.CollectionStartEvent, line: int) -> None:
        self._anchor(event.anchor, line)
        is_map = isinstance(event, events.MappingStartEvent)
        kind, default = ("map", f"{_TAG}map") if is_map else ("seq", f"{_TAG}seq")
        tag = default if event.tag in (None, "!") else event.tag
        if tag != default:
            what = _YAML_TYPES.get(tag, f"the tag {tag.replace(_TAG, '!!')}")
            raise self.error(line, f"{_clip(self._path())}: {what}; {_ENGINE_TYPES}")
        self._count(1, 0, line, "this value")
        self._depth_check(line, 1)
        path = self._path()
        node = _Node(kind, line, tag, {} if is_map else [])
        if event.anchor is not None:
            self.building.add(event.anchor)
        self.stack.append(_Frame(node, event.anchor, path, len(self.stack) + 1))

    def _end(self) -> None:
        frame = self.stack.pop()
        node = frame.node
        if node.kind == "map":
            for source in frame.merges:
                for key, entry in source.value.items():
                    node.value.setdefault(key, entry)
            children = [child for _, child in node.value.values()]
        else:
            children = node.value
        node.size = 1 + sum(c.size for c in children) + (len(children) if node.kind == "map" else 0)
        node.chars = sum(c.chars for c in children)
        node.height = 1 + max((c.height for c in children), default=0)
        if frame.anchor is not None:
            self.building.discard(frame.anchor)
            self.anchors[frame.anchor] = node
        self._add(node, node.line)

    def _add(self, node: _Node, line: int) -> None:
        if not self.stack:
            self.root = node
            return
        frame = self.stack[-1]
        if frame.node.kind == "seq":
            frame.node.value.append(node)
        elif frame.key is None:
            frame.key = self._key(frame, node, line)
        else:
            key, key_line = frame.key
            frame.key = None
            if key is None:
                self._merge(frame, node, line)
            elif key in frame.node.value:
                first = frame.node.value[key][0]
                raise self.error(
                    key_line,
                    f"{_clip(_join(frame, key))} is set twice (first on line {first}); the Pulumi engine "
                    "refuses duplicate keys: keep one",
                )
            else:
                frame.node.value[key] = (key_line, node)

    def _key(self, frame: _Frame, node: _Node, line: int) -> tuple[str | None, int]:
        where = f"a key of {frame.path}" if frame.path else "a top-level key"
        if node.kind != "scalar":
            shape = "a map" if node.kind == "map" else "a list"
            raise self.error(line, f"{where} is {shape}; keys must be strings")
        if node.tag == f"{_TAG}merge" and node.plain:
            return None, line
        if node.tag != f"{_TAG}str":
            what = _YAML_TYPES.get(node.tag, _scalar_kind(node.tag))
            raise self.error(
                line,
                f"{where}: {cut(node.value)} is {what}, not a string; keys must be strings "
                f"(quote it: '{node.value[:_SHOWN]}')",
            )
        return node.value, line

    def _merge(self, frame: _Frame, node: _Node, line: int) -> None:
        sources = node.value if node.kind == "seq" else [node]
        if not all(s.kind == "map" for s in sources):
            raise self.error(
                line, f"{_clip(_join(frame, '<<'))}: a merge key (<<) takes a map or a list of maps"
            )
        # Earlier sources win over later ones, explicit keys over all (YAML's merge rule).
        frame.merges.extend(sources)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_@/][A-Za-z0-9_@/:.-]*")


def _key_text(key: str) -> str:
    """A key as it reads in a path: quoted when empty, spaced or odd (`' '`, `'a b'`)."""
    return key if _PLAIN_KEY.fullmatch(key) else cut(key, 40)


def _join(frame: _Frame, key: str) -> str:
    # Top-level keys and config keys stand alone (`config`, `gke-gpu:cluster`); deeper keys are dotted.
    return _key_text(key) if frame.depth <= 2 else f"{frame.path}.{_key_text(key)}"


def _scalar_kind(tag: str) -> str:
    kinds = {"int": "a number", "float": "a number", "bool": "a boolean", "null": "null"}
    name = tag.removeprefix(_TAG)
    return kinds.get(name, f"a value tagged {tag.replace(_TAG, '!!')}")


class _Converter:
    """`_Node` graph -> JSON-typed Python values, refusing what the engine cannot carry."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.constructor = yaml.constructor.SafeConstructor()

    def error(self, node: _Node, path: str, problem: str) -> StackFileError:
        return StackFileError.at(self.name, node.line, f"{_clip(path)}: {problem}")

    def plain(self, node: _Node, path: str) -> Any:
        if node.kind == "map":
            return {
                key: self.plain(child, f"{path}.{_key_text(key)}") for key, (_, child) in node.value.items()
            }
        if node.kind == "seq":
            return [self.plain(child, f"{path}[{i}]") for i, child in enumerate(node.value)]
        return self.scalar(node, path)

    def scalar(self, node: _Node, path: str) -> Any:
        tag, text = node.tag, node.value
        if tag in _YAML_TYPES or tag not in _JSON_SCALARS:
            what = _YAML_TYPES.get(tag, f"a value tagged {tag.replace(_TAG, '!!')}")
            hint = "; quote it if you mean the text" if tag == f"{_TAG}timestamp" else ""
            raise self.error(node, path, f"{cut(text)} is {what}; {_ENGINE_TYPES}{hint}")
        if tag == f"{_TAG}str":
            return text
        if tag == f"{_TAG}int" and len(text.replace("_", "")) > 70:
            raise self.error(node, path, f"{cut(text)}: an integer beyond 64 bits")
        try:
            value = self.constructor.construct_object(yaml.ScalarNode(tag, text), deep=True)
        except (yaml.YAMLError, ValueError, TypeError, KeyError):
            raise self.error(node, path, f"{cut(text)} is not a valid {_scalar_kind(tag)}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(
                node,
                path,
                f"{cut(text)} is not a finite number; JSON (and so the engine) has no NaN or Infinity",
            )
        if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
            raise self.error(node, path, f"{cut(text)}: an integer beyond 64 bits")
        return value

    def engine_value(self, key: str, node: _Node) -> tuple[str, bool]:
        """One config entry as the engine passes it: (string, is secret)."""
        if node.kind == "scalar":
            if node.tag not in _JSON_SCALARS and node.tag != f"{_TAG}timestamp":
                self.scalar(node, _key_text(key))  # raises: an explicit tag the engine cannot take
            # The engine keeps a scalar's text as written (`0x10` stays "0x10"); null is empty.
            return ("" if node.tag == f"{_TAG}null" else node.value), False
        value = self.plain(node, _key_text(key))
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
    composer = _Composer(name)
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
    if config is None or (config.kind == "scalar" and config.tag == f"{_TAG}null"):
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
