"""Property-based tests: no stack file, however broken, makes the loader or the render crash or hang.

(a) The loader (`components/stack/stack_file.py`) on text fuzz, mutated valid files, and generated YAML with
aliases, tags, merge keys, deep nesting and alias bombs; `decode_config_value` against `json.loads`.
(b) The render's `main()` in-process on mutations of every `Pulumi.<stack>.yaml` (keys deleted,
renamed, retyped, unknown keys, deep nesting, huge strings, wrong namespaces, broken text).

The property: the loader returns the engine's strings or raises one `Pulumi.<stack>.yaml:LINE: ...`
line; the render exits 0, 2 with a message naming the stack file or a key, or 3 with the policy
verdict printed; never an exception, never exit 1, never a hang (a SIGALRM guard, plus Hypothesis
deadlines for slowness).

Example counts stay small in the default run; `HYPOTHESIS_PROFILE=deep .venv/bin/python -m pytest
tests/test_fuzz.py` runs 2,000 examples per property.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import string
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from gke_gpu.stack.config_value import decode_config_value
from gke_gpu.stack.stack_file import (
    MAX_DEPTH,
    MAX_NODES,
    StackFile,
    StackFileError,
    load_stack_file,
)
from tests.hang_guard import no_hang
from tools import render
from tools.offline import ROOT, stacks

_COMMON = {
    "database": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}
settings.register_profile("gke-gpu-ci", derandomize=True, **_COMMON)
settings.register_profile("deep", max_examples=2000, **_COMMON)
DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"
PROFILE = settings.get_profile("deep" if DEEP else "gke-gpu-ci")


def fuzz(examples: int, deadline_ms: int) -> settings:
    """`examples` per property in the default run, 2,000 under HYPOTHESIS_PROFILE=deep."""
    return settings(
        PROFILE, max_examples=2000 if DEEP else examples, deadline=timedelta(milliseconds=deadline_ms)
    )


MESSAGE = re.compile(r"Pulumi\.fuzz\.yaml(:\d+)?: \S")


def check_loader(content: bytes) -> StackFile | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_bytes(content)
        try:
            with no_hang():
                loaded = load_stack_file(path)
        except StackFileError as exc:
            message = str(exc)
            assert MESSAGE.match(message), message
            assert "\n" not in message and len(message) < 600, message
            return None
    assert all(isinstance(k, str) and ":" in k and isinstance(v, str) for k, v in loaded.config.items())
    assert set(loaded.secret_keys) <= set(loaded.config)
    return loaded


# -- (a) the loader ---------------------------------------------------------------------------------------

VALID_TEXTS = [(ROOT / f"Pulumi.{s}.yaml").read_text(encoding="utf-8") for s in stacks()]
YAML_CHARS = ":-[]{}&*!|>'\"#%@`,? \t\n\\<~.0123456789aeflnrsty"


@fuzz(examples=100, deadline_ms=2000)
@given(st.one_of(st.binary(max_size=400), st.text(max_size=400).map(lambda t: t.encode("utf-8", "replace"))))
@example(b"config:\n\tgcp:project: p\n")
@example(b"config: &a [*a]\n")
@example(b"\xff\xfe\x00c\x00o")
def test_loader_on_arbitrary_bytes(content: bytes) -> None:
    check_loader(content)


@st.composite
def mutated_text(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(VALID_TEXTS))
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "duplicate-line"]))
        if action == "insert":
            text = (
                text[:position] + draw(st.text(alphabet=YAML_CHARS, min_size=1, max_size=8)) + text[position:]
            )
        elif action == "delete":
            text = text[:position] + text[position + draw(st.integers(1, 20)) :]
        else:
            lines = text.splitlines(keepends=True)
            index = draw(st.integers(0, max(len(lines) - 1, 0)))
            text = "".join(lines[: index + 1] + lines[index:])
    return text.encode("utf-8")


@fuzz(examples=60, deadline_ms=2000)
@given(mutated_text())
def test_loader_on_mutated_stack_files(content: bytes) -> None:
    check_loader(content)


SCALARS = [
    "plain",
    "'quoted'",
    '"dq\\x41"',
    "12",
    "0x1F",
    "1_000",
    "-3.5e2",
    ".inf",
    ".nan",
    "~",
    "null",
    "yes",
    "True",
    "2024-01-01",
    "2001-12-14t21:59:43.10-05:00",
    "!!binary aGk=",
    "!!str 12",
    "!!int '7'",
    "!!float 1",
    "!custom x",
    "!!python/object/apply:os.system ['true']",
    "9" * 400,
    "|\n      block",
    "<<",
]


@st.composite
def yaml_value(draw: st.DrawFn, anchors: list[str], depth: int) -> str:
    """Flow-style YAML with anchors, aliases, tags and merge keys (valid or not: the loader decides)."""
    kinds = ["scalar", "alias"] if depth <= 0 else ["scalar", "alias", "seq", "map", "deep"]
    kind = draw(st.sampled_from(kinds))
    if kind == "alias" and anchors:
        return f"*{draw(st.sampled_from(anchors))}"
    anchor = f"&a{len(anchors)} " if draw(st.booleans()) else ""
    if kind in ("scalar", "alias"):
        text = anchor + draw(st.sampled_from(SCALARS[:-2]))  # no block scalar or `<<` in flow context
    elif kind == "deep":
        levels = draw(st.integers(MAX_DEPTH - 5, MAX_DEPTH + 40))
        text = anchor + "[" * levels + "]" * levels
    elif kind == "seq":
        tag = draw(st.sampled_from(["", "", "!!set ", "!!omap ", "!!seq "]))
        items = [draw(yaml_value(anchors, depth - 1)) for _ in range(draw(st.integers(0, 4)))]
        text = f"{anchor}{tag}[{', '.join(items)}]"
    else:
        entries = []
        for _ in range(draw(st.integers(0, 4))):
            key = draw(st.sampled_from(["mode", "name", "mode", "1", "~", "'<<'", "<<", "[a]", "x y"]))
            entries.append(f"{key}: {draw(yaml_value(anchors, depth - 1))}")
        text = f"{anchor}{{{', '.join(entries)}}}"
    if anchor:
        anchors.append(anchor[1:-1])
    return text


@st.composite
def yaml_document(draw: st.DrawFn) -> bytes:
    anchors: list[str] = []
    lines = ["config:"]
    for i in range(draw(st.integers(1, 5))):
        key = draw(st.sampled_from([f"gke-gpu:k{i}", f"gcp:k{i}", f"k{i}", f"gke-gpu:k{i % 2}"]))
        lines.append(f"  {key}: {draw(yaml_value(anchors, draw(st.integers(0, 4))))}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["---", "\t", "  x: [", "..."])))
    return ("\n".join(lines) + "\n").encode("utf-8")


@fuzz(examples=60, deadline_ms=2000)
@given(yaml_document())
@example(b"config:\n  gke-gpu:k: &a [1]\n  gke-gpu:j: {<<: *a}\n")
@example(b"config:\n  gke-gpu:k0: &a0 {'<<': 1, <<: {b: 2}}\n")
def test_loader_on_generated_yaml_with_aliases_tags_and_merges(content: bytes) -> None:
    check_loader(content)


@fuzz(examples=25, deadline_ms=2000)
@given(st.integers(1, 12), st.integers(1, 12))
def test_alias_bombs_are_refused_quickly(levels: int, width: int) -> None:
    lines = ["config:", "  gke-gpu:a0: &a0 [lol]"]
    for i in range(1, levels + 1):
        lines.append(f"  gke-gpu:a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    content = ("\n".join(lines) + "\n").encode()
    expanded = sum(sum(width**j for j in range(i + 1)) + 1 for i in range(levels + 1))  # lists + "lol"s
    loaded = check_loader(content)
    if expanded > MAX_NODES * 2:
        assert loaded is None, "an alias bomb must be refused"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)
KEY = st.tuples(
    st.sampled_from(["gke-gpu", "gcp", "kubernetes", "x"]), st.text(string.ascii_letters, min_size=1)
)


@fuzz(examples=30, deadline_ms=2000)
@given(
    st.dictionaries(
        KEY.map(":".join),
        st.one_of(
            st.lists(JSON, max_size=4),
            st.dictionaries(st.text(max_size=8), JSON, max_size=4),
            st.text(max_size=30).filter(str.strip),
        ),
    )
)
def test_valid_documents_read_as_the_engine_passes_them(config: dict[str, Any]) -> None:
    """Whatever PyYAML dumps without hazards comes back: objects as JSON, strings as written."""
    assume(all(_depth(v) <= MAX_DEPTH - 2 for v in config.values()))  # under `config:` in the document
    content = yaml.safe_dump({"config": config}, allow_unicode=True, width=10_000).encode("utf-8")
    loaded = check_loader(content)
    assert loaded is not None
    # PyYAML's own reading is the reference (its dumper does not round-trip every character).
    for key, value in yaml.safe_load(content)["config"].items():
        if isinstance(value, str):
            assert loaded.config[key] == value
        else:
            assert json.loads(loaded.config[key]) == value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 1


@fuzz(examples=100, deadline_ms=2000)
@given(st.one_of(JSON.map(json.dumps), st.text(max_size=200), st.text('[]{}",:0123456789 ', max_size=400)))
@example("[" * 5000)
@example('"' + "\\" * 3)
@example("1" * 5000)
def test_decode_config_value_is_json_loads_within_bounds(text: str) -> None:
    try:
        expected: Any = json.loads(text)
    except json.JSONDecodeError:
        expected = text
    except (RecursionError, ValueError):
        expected = StackFileError
    value: Any = None
    refused: StackFileError | None = None
    try:
        with no_hang():
            value = decode_config_value("gke-gpu:k", text)
    except StackFileError as exc:
        refused = exc
    if refused is not None:
        assert str(refused).startswith("gke-gpu:k: ")
        assert expected is StackFileError or text.count("[") + text.count("{") > MAX_DEPTH
    else:
        assert expected is not StackFileError
        assert json.dumps(value) == json.dumps(expected)


# -- (b) the render on mutated stacks -------------------------------------------------------------------

BASES = {
    s: yaml.safe_load((ROOT / f"Pulumi.{s}.yaml").read_text(encoding="utf-8"))["config"] for s in stacks()
}
NAMESPACE_SWAPS = ["gke_gpu", "gcp", "kubernetes", "GKE-GPU", "gke-gpu ", "gkegpu", "aws", ""]
ODD_VALUES = st.one_of(
    JSON,
    st.sampled_from([0, -1, 1, 48, 49, 10**6, 2**63, -(2**63), 1.5, "", " ", "x" * 300, [], {}, None, True]),
    st.integers(10_000, 200_000).map(lambda n: "x" * n),
)


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*path, index))
    return found


def _parent(config: dict, path: tuple) -> Any:
    node: Any = config
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def mutated_stack(draw: st.DrawFn) -> tuple[str, bytes]:
    stack = draw(st.sampled_from(sorted(BASES)))
    config = copy.deepcopy(BASES[stack])
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(config)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, last = _parent(config, path), path[-1]
        op = draw(st.sampled_from(["delete", "rename", "retype", "insert", "nest", "namespace"]))
        if op == "delete":
            del parent[last]
        elif op == "rename" and isinstance(parent, dict):
            new = draw(
                st.sampled_from([f"{last}s", str(last).upper(), str(last)[:-1], f"{last}_"])
                | st.text(max_size=12)
            )
            parent[new] = parent.pop(last)
        elif op == "retype":
            parent[last] = draw(ODD_VALUES)
        elif op == "insert" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(ODD_VALUES)
        elif op == "nest":
            value = parent[last]
            for _ in range(draw(st.integers(2, 45))):
                value = draw(st.sampled_from([[value], {"k": value}]))
            parent[last] = value
        elif op == "namespace" and len(path) == 1 and ":" in str(last):
            _, name = str(last).split(":", 1)
            config[f"{draw(st.sampled_from(NAMESPACE_SWAPS))}:{name}"] = config.pop(last)
    text = yaml.safe_dump({"config": config}, sort_keys=False, allow_unicode=True, width=200)
    if draw(st.integers(0, 9)) == 0:  # now and then, break the text too
        position = draw(st.integers(0, len(text)))
        text = (
            text[:position]
            + draw(st.sampled_from(["\t", "---\n", ": :", "&a *a", "\n  x: [", "\x00"]))
            + text[position:]
        )
    return stack, text.encode("utf-8")


def run_render(content: bytes, *extra: str) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "Pulumi.fuzz.yaml").write_bytes(content)
        out, err = io.StringIO(), io.StringIO()
        with no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = render.main(["--stack", "fuzz", "--stack-dir", tmp, *extra])
    return code, out.getvalue(), err.getvalue()


# The stack file and line, or problem lines that start with the key as written (`  - gke-gpu:x.y: ...`,
# `  - gke-gpu :gpuNodes: ...`): a `namespace:name` before the first ": " of the line.
STACK_FILE_LINE = re.compile(r"^error: Pulumi\.fuzz\.yaml:\d+: \S")
PROBLEM = re.compile(r"^  - (.+?): \S", re.MULTILINE)


def names_a_key(err: str) -> bool:
    if STACK_FILE_LINE.match(err):
        return True
    keys = PROBLEM.findall(err)
    return bool(keys) and all(":" in key for key in keys)


def check_render(content: bytes) -> str:
    """The property for one stack file; returns how the render ended (for Hypothesis' statistics)."""
    code, out, err = run_render(content)
    assert code in (0, 2, 3), (code, err[-2000:])
    if code == 2:
        assert err.startswith("error: "), err[:500]
        assert names_a_key(err), err[:2000]
        assert out == ""
    if code == 3:
        assert "policy check FAILED" in out.splitlines()[1]
    for line in err.splitlines():
        assert len(line) < 1500, f"a message line of {len(line)} characters: {line[:300]}"
    return f"exit {code}" + (": the stack file" if err.startswith("error: Pulumi.fuzz.yaml:") else "")


@fuzz(examples=8, deadline_ms=20_000)
@given(mutated_stack())
@example(("dev", b"config:\n  gke-gpu:cluster:\n    mode: autopilot\n    ' ': gpu-dev\n"))
@example(("onprem", b"config:\n  gke-gpu:cluster: {mode: autopilot}\n  'gke-gpu :gpuNodes': [n1]\n"))
@example(("onprem", b"config:\n  ' ':\n  - " + b"- " * 40 + b"null\n"))
def test_render_on_mutated_stacks(case: tuple[str, bytes]) -> None:
    event(check_render(case[1]))


@pytest.mark.parametrize(
    "stack",
    [
        'config:\n  gke-gpu:cluster: {mode: standard, name: "' + "x" * 200_000 + '"}\n',
        "config:\n  gke-gpu:cluster: " + "[" * 31 + "]" * 31 + "\n",
        "config:\n  gke-gpu:cluster: '" + "[" * 3000 + "]" * 3000 + "'\n",
        "config:\n  gke_gpu:monitoring: {dcgm: none}\n  gke-gpu:cluster: {mode: autopilot}\n"
        "  gcp:project: test-project\n  gcp:region: us-central1\n",
    ],
    ids=["huge-string", "depth-31", "deep-json-string", "wrong-namespace"],
)
def test_render_on_known_hard_stacks(stack: str) -> None:
    check_render(stack.encode())
