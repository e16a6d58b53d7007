"""Pass 1, staged: each `gke-gpu:` section, and each pool and workload, is shape-checked on its own.

A bad pool does not hide a bad workload, and a broken section is recorded in :class:`Broken` so
that the second pass skips the rules that would read it (instead of judging defaults in its place).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.alias_generators import to_snake

from ..cluster.model import ClusterConfig
from ..core.common import TOP_LEVEL_KEYS, cut
from ..core.messages import describe_pydantic_error, format_path
from ..core.section import Broken
from ..core.shapes import expected
from ..gpu.pool import GpuPool
from ..serving.model import ServingConfig
from ..workloads.model import WorkloadConfig
from .stack_model import StackConfig

# Sections validated item by item, so one bad entry does not hide the others.
_ITEM_MODELS: dict[str, type] = {"gpuPools": GpuPool, "workloads": WorkloadConfig, "serving": ServingConfig}


@dataclass
class Shape:
    """The shape-valid part of the config (None when the cluster section is unusable) and problems."""

    config: StackConfig | None
    problems: list[str] = field(default_factory=list)
    broken: Broken = field(default_factory=Broken)


def _errors(exc: ValidationError, prefix: tuple[Any, ...], root_loc: tuple[Any, ...] = ()) -> list[str]:
    """Each error described against the stack file's model, its path under `root_loc` (a fleet
    worker's sections: `gke-gpu:fleet.workers[1].gpuPools[0].maxNodes`)."""
    return [
        describe_pydantic_error(
            {**e, "loc": (*prefix, *e["loc"])},
            root=StackConfig,
            path=lambda loc: format_path((*root_loc, *loc)),
        )
        for e in exc.errors()
    ]


# Building a TypeAdapter generates its validator (most of a warm render's time when done per parse):
# each is built once per process, for the section or list item it checks.
@functools.cache
def _adapter(key: str) -> TypeAdapter[Any]:
    annotation = StackConfig.model_fields[to_snake(key)].annotation
    assert annotation is not None, "every StackConfig field is annotated"
    return TypeAdapter(annotation)


@functools.cache
def _item_adapter(key: str) -> TypeAdapter[Any]:
    return TypeAdapter(_ITEM_MODELS[key])


def validate_shape(raw: Mapping[str, Any], root_loc: tuple[Any, ...] = ()) -> Shape:
    """Check every section's shape; return what passed, every problem, and what is broken. `root_loc`:
    where the sections sit in the stack file (a fleet worker's: `("fleet", "workers", 1)`)."""

    def where(*loc: Any) -> str:
        return format_path((*root_loc, *loc))

    problems: list[str] = []
    broken = Broken()
    valid: dict[str, Any] = {}
    for key in sorted(set(raw) - set(TOP_LEVEL_KEYS)):
        meant = _near_miss(str(key), raw)
        if meant is not None:
            # What the user meant is absent, not empty: the rules reading it must not judge it empty.
            broken.sections.add(meant)
        problems.append(
            f"{where(str(key))}: unknown key; "
            + (f"did you mean {where(meant)}? " if meant is not None else "")
            + "allowed keys: "
            + ", ".join(where(k) for k in TOP_LEVEL_KEYS)
        )
    if raw.get("cluster") is None and "cluster" not in broken.sections:
        problems.append(
            f"{where('cluster')}: required; at least `{where('cluster')}: {{mode: autopilot}}` "
            "(autopilot, standard or existing)"
        )
        broken.sections.add("cluster")
    for key in TOP_LEVEL_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        if key in _ITEM_MODELS:
            items = _validate_items(key, value, problems, broken, root_loc)
            if items is not None:
                valid[key] = items
            continue
        try:
            valid[key] = _adapter(key).validate_python(value)
        except ValidationError as exc:
            problems += _errors(exc, (key,), root_loc)
            salvaged = _salvage_cluster(value, broken) if key == "cluster" else None
            if salvaged is None:
                broken.sections.add(key)
            else:
                valid[key] = _adapter(key).validate_python(salvaged)
    if "cluster" in broken.sections:
        return Shape(None, problems, broken)
    # Each section is validated already, by its own adapter: the whole file's model is put together
    # from them, not validated again (that would build every section's validator, those of the
    # sections a stack leaves out included).
    fields = {to_snake(key): value for key, value in valid.items()}
    return Shape(StackConfig.model_construct(set(fields), **fields), problems, broken)


def _near_miss(key: str, raw: Mapping[str, Any]) -> str | None:
    """The top-level key `key` is a misspelling of, when that key is not in the stack file itself
    (`gpuPool` for `gpuPools`, `Cluster` for `cluster`)."""
    absent = [k for k in TOP_LEVEL_KEYS if k not in raw]
    folded = {k.lower(): k for k in absent}
    if key.lower() in folded:
        return folded[key.lower()]
    import difflib

    close = difflib.get_close_matches(key, absent, n=1, cutoff=0.8)
    return close[0] if close else None


def _salvage_cluster(value: Any, broken: Broken) -> dict[str, Any] | None:
    """The keys of a cluster section that are valid on their own, when its `mode` is valid: the
    other sections' rules need the mode, so one bad cluster key must not hide them."""
    if not isinstance(value, dict) or "mode" not in value:
        return None
    try:
        ClusterConfig.model_validate({"mode": value["mode"]})
    except ValidationError:
        return None
    kept: dict[str, Any] = {"mode": value["mode"]}
    for key, item in value.items():
        if key == "mode":
            continue
        try:
            ClusterConfig.model_validate({"mode": value["mode"], key: item})
        except ValidationError:
            broken.cluster_keys.add(str(key))
        else:
            kept[key] = item
    return kept


def _validate_items(
    key: str, value: Any, problems: list[str], broken: Broken, root_loc: tuple[Any, ...]
) -> list[Any] | None:
    if not isinstance(value, list):
        shape = expected(StackConfig.model_fields[to_snake(key)].annotation, value)
        if key == "workloads" and isinstance(value, str) and _is_workload_name(value):
            shape = f"a list of workload names or mappings, such as [{value}]"  # the `- nvidia-smi` shorthand
        problems.append(f"{format_path((*root_loc, key))}: {cut(value)} is not allowed; expected {shape}")
        broken.sections.add(key)
        return None
    max_items = _max_length(key)
    if max_items is not None and len(value) > max_items:
        problems.append(f"{format_path((*root_loc, key))}: has {len(value)} entries; at most {max_items}")
        broken.sections.add(key)
        return None
    adapter = _item_adapter(key)
    kept: list[Any] = []
    for i, item in enumerate(value):
        entry = {"name": item} if key == "workloads" and isinstance(item, str) else item
        try:
            checked = adapter.validate_python(entry)
        except ValidationError as exc:
            problems += _errors(exc, (key, i), root_loc)
            if key == "gpuPools":
                name = entry.get("name") if isinstance(entry, dict) else None
                if isinstance(name, str):
                    broken.pools.add(name)
                else:
                    broken.unnamed_pools += 1
            else:
                broken.sections.add(f"{key}[{i}]")
        else:
            kept.append(checked)
            indexes = {"gpuPools": broken.pool_indexes, "serving": broken.serving_indexes}
            indexes.get(key, broken.workload_indexes).append(i)
    return kept


def _is_workload_name(value: str) -> bool:
    try:
        _item_adapter("workloads").validate_python({"name": value})
    except ValidationError:
        return False
    return True


def _max_length(key: str) -> int | None:
    for meta in StackConfig.model_fields[to_snake(key)].metadata:
        value = getattr(meta, "max_length", None)
        if value is not None:
            return int(value)
    return None
