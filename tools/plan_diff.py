"""The difference between two render documents, resource by resource: what a change would create,
delete, update in place, or replace.

A changed input under one of the resource's ``replaceOnChange`` paths (`tools/plan.py`) marks it
REPLACE; replacements are listed first. `tools/render.py --diff OLD.json` prints it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tools.plan_tree import _short


@dataclass
class ResourceDiff:
    urn: str
    type: str
    name: str
    status: str  # "create" | "delete" | "update" | "replace"
    changes: list[tuple[str, Any, Any, bool]]  # (path, old, new, forces replacement)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def _forces(path: str, forcing: Iterable[str]) -> bool:
    plain = re.sub(r"\[\d+\]", "", path)
    return any(plain == f or plain.startswith(f + ".") for f in forcing)


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[ResourceDiff]:
    old_by = {r["urn"]: r for r in old["resources"] if not r["component"]}
    new_by = {r["urn"]: r for r in new["resources"] if not r["component"]}
    result: list[ResourceDiff] = []
    for urn, r in new_by.items():
        if urn not in old_by:
            result.append(ResourceDiff(urn, r["type"], r["name"], "create", []))
            continue
        before, after = _flatten(old_by[urn]["inputs"]), _flatten(r["inputs"])
        forcing = r.get("replaceOnChange", [])
        # What the program leaves to GCP after creation is never sent again: no change, no replacement.
        ignored = [re.sub(r'\["([^"]*)"\]', r".\1", i) for i in r.get("ignoreChanges", [])]
        changes = [
            (path, before.get(path), after.get(path), _forces(path, forcing))
            for path in sorted(set(before) | set(after))
            if before.get(path) != after.get(path) and not _forces(path, ignored)
        ]
        if changes:
            status = "replace" if any(c[3] for c in changes) else "update"
            result.append(ResourceDiff(urn, r["type"], r["name"], status, changes))
    for urn, r in old_by.items():
        if urn not in new_by:
            result.append(ResourceDiff(urn, r["type"], r["name"], "delete", []))
    return result


def format_diff(changes: list[ResourceDiff]) -> str:
    if not changes:
        return "no changes"
    marks = {"create": "+ CREATE ", "delete": "- DELETE ", "update": "~ UPDATE ", "replace": "! REPLACE"}
    lines = []
    for c in sorted(changes, key=lambda c: ("replace", "delete", "update", "create").index(c.status)):
        lines.append(f"{marks[c.status]} {c.name} [{c.type}]")
        for path, before, after, forces in c.changes:
            flag = "  (forces replacement)" if forces else ""
            lines.append(f"      {path}: {_short(before)} -> {_short(after)}{flag}")
    counts = {s: sum(1 for c in changes if c.status == s) for s in ("replace", "delete", "update", "create")}
    lines.append(", ".join(f"{n} to {s}" for s, n in counts.items() if n))
    return "\n".join(lines)
