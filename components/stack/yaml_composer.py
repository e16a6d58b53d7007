"""A stack file's YAML built from PyYAML's event stream, within the engine's bounds (stack/stack_file.py
says what is refused and why): no recursion, no Python object built, every alias expanded only by
count. `StackFileError` says where (`Pulumi.<stack>.yaml:LINE`) and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
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
INT64 = 2**63
SHOWN = 80

TAG = "tag:yaml.org,2002:"
JSON_SCALARS = {f"{TAG}{t}" for t in ("str", "int", "float", "bool", "null")}
YAML_TYPES = {
    f"{TAG}timestamp": "a date or time",
    f"{TAG}binary": "binary data (!!binary)",
    f"{TAG}set": "a set (!!set)",
    f"{TAG}omap": "an ordered map (!!omap)",
    f"{TAG}pairs": "a list of pairs (!!pairs)",
}
ENGINE_TYPES = "the Pulumi engine takes strings, numbers, booleans, null, lists and maps only"


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


def cut(value: Any, limit: int = SHOWN) -> str:
    """`repr` of a value, cut to about `limit` characters."""
    return clip(repr(value), limit)


def clip(text: str, limit: int = SHOWN) -> str:
    return text if len(text := redact(text[:16384]) + text[16384:]) <= limit else text[: limit - 3] + "..."


@dataclass(eq=False)
class Node:
    kind: str  # "scalar" | "seq" | "map"
    line: int
    tag: str
    value: Any = None  # scalar: its text; seq: list of nodes; map: {key: (key line, node)}
    plain: bool = False  # a plain (unquoted) scalar
    size: int = 1  # values once aliases are expanded
    chars: int = 0
    height: int = 1


@dataclass
class Frame:
    node: Node
    anchor: str | None
    path: str
    depth: int
    key: tuple[str | None, int] | None = None  # the key whose value comes next; None: a merge (<<)
    merges: list[Node] = field(default_factory=list)


class Composer:
    """The document as a graph of `Node` (aliases share nodes), built without recursion."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.resolver = yaml.resolver.Resolver()
        self.anchors: dict[str, Node] = {}
        self.building: set[str] = set()
        self.stack: list[Frame] = []
        self.root: Node | None = None
        self.documents = 0
        self.nodes = 0
        self.chars = 0

    def error(self, line: int | None, problem: str) -> StackFileError:
        return StackFileError.at(self.name, line, problem)

    def compose(self, text: str) -> Node | None:
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
        return join_key(frame, "<<" if frame.key[0] is None else frame.key[0])

    def _count(self, nodes: int, chars: int, line: int, what: str) -> None:
        self.nodes += nodes
        self.chars += chars
        if self.nodes > MAX_NODES:
            raise self.error(
                line,
                f"{clip(self._path())}: {what} makes the file hold more than {MAX_NODES:,} values "
                "(an alias counts as every value it repeats); a stack file may hold at most that",
            )
        if self.chars > MAX_EXPANDED_CHARS:
            raise self.error(
                line,
                f"{clip(self._path())}: {what} makes the file's values exceed {MAX_EXPANDED_CHARS:,} "
                "characters (an alias counts as every value it repeats)",
            )

    def _depth_check(self, line: int, height: int) -> None:
        if len(self.stack) + height > MAX_DEPTH:
            raise self.error(line, f"{clip(self._path())}: nested deeper than {MAX_DEPTH} levels")

    def _anchor(self, anchor: str | None, line: int) -> None:
        if anchor is not None and anchor in self.building:
            raise self.error(line, f"anchor &{anchor} is defined again inside itself")

    def _scalar(self, event: events.ScalarEvent, line: int) -> None:
        self._anchor(event.anchor, line)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = Node("scalar", line, tag, event.value, plain=event.style is None, chars=len(event.value))
        self._count(1, node.chars, line, "this value")
        self._depth_check(line, 1)
        if event.anchor is not None:
            self.anchors[event.anchor] = node
        self._add(node, line)

    def _alias(self, event: events.AliasEvent, line: int) -> None:
        anchor = event.anchor
        assert anchor is not None, "PyYAML's parser names the anchor of every alias"
        if anchor in self.building:
            raise self.error(line, f"{clip(self._path())}: alias *{anchor} is used inside its own anchor")
        node = self.anchors.get(anchor)
        if node is None:
            raise self.error(line, f"{clip(self._path())}: alias *{anchor} has no anchor &{anchor} before it")
        self._count(node.size, node.chars, line, f"alias *{anchor}")
        self._depth_check(line, node.height)
        self._add(node, line)

    def _start(self, event: events.CollectionStartEvent, line: int) -> None:
        self._anchor(event.anchor, line)
        is_map = isinstance(event, events.MappingStartEvent)
        kind, default = ("map", f"{TAG}map") if is_map else ("seq", f"{TAG}seq")
        tag = default if event.tag in (None, "!") else event.tag
        if tag != default:
            what = YAML_TYPES.get(tag, f"the tag {tag.replace(TAG, '!!')}")
            raise self.error(line, f"{clip(self._path())}: {what}; {ENGINE_TYPES}")
        self._count(1, 0, line, "this value")
        self._depth_check(line, 1)
        path = self._path()
        node = Node(kind, line, tag, {} if is_map else [])
        if event.anchor is not None:
            self.building.add(event.anchor)
        self.stack.append(Frame(node, event.anchor, path, len(self.stack) + 1))

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

    def _add(self, node: Node, line: int) -> None:
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
                    f"{clip(join_key(frame, key))} is set twice (first on line {first}); the Pulumi engine "
                    "refuses duplicate keys: keep one",
                )
            else:
                frame.node.value[key] = (key_line, node)

    def _key(self, frame: Frame, node: Node, line: int) -> tuple[str | None, int]:
        where = f"a key of {frame.path}" if frame.path else "a top-level key"
        if node.kind != "scalar":
            shape = "a map" if node.kind == "map" else "a list"
            raise self.error(line, f"{where} is {shape}; keys must be strings")
        if node.tag == f"{TAG}merge" and node.plain:
            return None, line
        if node.tag != f"{TAG}str":
            what = YAML_TYPES.get(node.tag, scalar_kind(node.tag))
            raise self.error(
                line,
                f"{where}: {cut(node.value)} is {what}, not a string; keys must be strings "
                f"(quote it: '{node.value[:SHOWN]}')",
            )
        return node.value, line

    def _merge(self, frame: Frame, node: Node, line: int) -> None:
        sources = node.value if node.kind == "seq" else [node]
        if not all(s.kind == "map" for s in sources):
            raise self.error(
                line, f"{clip(join_key(frame, '<<'))}: a merge key (<<) takes a map or a list of maps"
            )
        # Earlier sources win over later ones, explicit keys over all (YAML's merge rule).
        frame.merges.extend(sources)


PLAIN_KEY = re.compile(r"[A-Za-z0-9_@/][A-Za-z0-9_@/:.-]*")


def key_text(key: str) -> str:
    """A key as it reads in a path: quoted when empty, spaced or odd (`' '`, `'a b'`)."""
    return key if PLAIN_KEY.fullmatch(key) else cut(key, 40)


def join_key(frame: Frame, key: str) -> str:
    # Top-level keys and config keys stand alone (`config`, `gke-gpu:cluster`); deeper keys are dotted.
    return key_text(key) if frame.depth <= 2 else f"{frame.path}.{key_text(key)}"


def scalar_kind(tag: str) -> str:
    kinds = {"int": "a number", "float": "a number", "bool": "a boolean", "null": "null"}
    name = tag.removeprefix(TAG)
    return kinds.get(name, f"a value tagged {tag.replace(TAG, '!!')}")
