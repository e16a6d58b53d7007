"""The examples in the docs are written against the package schema: every property they set exists,
at the right depth, with a value of the right type; every required input is there; every output they
read exists. The Python example in README.md runs under the SDK's mocks.

What is not checked here (it needs the Pulumi CLI): that `pulumi package add` generates the SDK the
TypeScript example imports, and that Pulumi YAML evaluates the example as read here.
"""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core.package import PACKAGE
from tools import schema as package_schema
from tools.offline import UNKNOWN, run_program

ROOT = Path(__file__).resolve().parent.parent
YAML_EXAMPLE = ROOT / "docs" / "examples" / "yaml" / "Pulumi.yaml"
TS_EXAMPLE = ROOT / "docs" / "examples" / "typescript" / "index.ts"
Output, Opaque = package_schema.Output, package_schema.Opaque


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return package_schema.load_committed()


def _token(type_: str) -> str:
    """`gke-gpu:GpuNodePool` (YAML's short form) or `gke-gpu:index:GpuNodePool` -> the full token."""
    parts = type_.split(":")
    return f"{parts[0]}:index:{parts[-1]}" if len(parts) == 2 else type_


# ---------------------------------------------------------------------------------------------------
# Pulumi YAML: ${resource.output} is another resource's output; ${name} a config value or variable.

_INTERPOLATION = re.compile(r"\$\{([^}]+)\}")


def _yaml_value(value: Any, resources: dict[str, str], reads: list[tuple[str, str]]) -> Any:
    if isinstance(value, dict):
        return {k: _yaml_value(v, resources, reads) for k, v in value.items()}
    if isinstance(value, list):
        return [_yaml_value(v, resources, reads) for v in value]
    if isinstance(value, str) and (refs := _INTERPOLATION.findall(value)):
        outputs = [r for r in refs if r.split(".")[0] in resources]
        for ref in outputs:
            head, _, prop = ref.partition(".")
            reads.append((resources[head], prop))
        return Output() if outputs else Opaque()
    return value


def test_the_yaml_example_fits_the_schema(schema: dict[str, Any]) -> None:
    program = yaml.safe_load(YAML_EXAMPLE.read_text(encoding="utf-8"))
    ours = {
        name: _token(spec["type"])
        for name, spec in program["resources"].items()
        if spec["type"].startswith(f"{PACKAGE}:")
    }
    assert sorted(ours.values()).count(f"{PACKAGE}:index:GpuNodePool") == 2, "a network, a cluster, two pools"
    assert {f"{PACKAGE}:index:GkeNetwork", f"{PACKAGE}:index:GkeCluster"} <= set(ours.values())
    reads: list[tuple[str, str]] = []
    problems = []
    for name, token in ours.items():
        inputs = _yaml_value(program["resources"][name].get("properties", {}), ours, reads)
        problems += [f"{name}: {p}" for p in package_schema.input_problems(schema, token, inputs)]
    _yaml_value(program.get("outputs", {}), ours, reads)
    problems += _unknown_outputs(schema, reads)
    assert problems == []
    assert program["packages"][PACKAGE]["version"] == schema["version"]


def _unknown_outputs(schema: dict[str, Any], reads: list[tuple[str, str]]) -> list[str]:
    problems = []
    for token, prop in reads:
        outputs = schema["resources"][token].get("properties", {})
        if prop.split(".")[0] not in outputs:
            problems.append(f"{token} has no output {prop!r} (outputs: {', '.join(sorted(outputs))})")
    return problems


# ---------------------------------------------------------------------------------------------------
# TypeScript: the `new gkegpu.<Component>("name", {...})` calls, read with a parser for the subset the
# example uses (object and array literals, strings, numbers, booleans, dotted names, calls).

_TOKEN = re.compile(
    r"""\s*(?:(?P<comment>//[^\n]*)"""
    r"""|(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
    r"""|(?P<number>-?\d+(?:\.\d+)?)"""
    r"""|(?P<name>[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)"""
    r"""|(?P<punct>[{}\[\](),:;=])"""
    r"""|(?P<other>\S))"""  # anything else (`*`, `.`, operators): refused inside a constructor's args
)


def _tokens(source: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while source[pos:].strip():
        match = _TOKEN.match(source, pos)
        assert match is not None
        pos = match.end()
        kind = str(match.lastgroup)
        if kind != "comment":
            tokens.append((kind, match.group(kind)))
    return tokens


class _Reader:
    def __init__(self, tokens: list[tuple[str, str]], components: dict[str, str]) -> None:
        self.tokens, self.pos, self.components = tokens, 0, components
        self.reads: list[tuple[str, str]] = []

    def peek(self) -> str:
        return self.tokens[self.pos][1]

    def take(self, expected: str | None = None) -> tuple[str, str]:
        kind, text = self.tokens[self.pos]
        if expected is not None and text != expected:
            raise ValueError(f"index.ts: expected {expected!r}, found {text!r}")
        self.pos += 1
        return kind, text

    def value(self) -> Any:
        kind, text = self.take()
        if text == "{":
            obj = {}
            while self.peek() != "}":
                key = self.take()[1].strip("\"'")
                obj[key] = self.value() if self.take()[1] == ":" else Opaque()
                if self.peek() == ",":
                    self.take(",")
            self.take("}")
            return obj
        if text == "[":
            items = []
            while self.peek() != "]":
                items.append(self.value())
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return items
        if kind == "string":
            return text[1:-1]
        if kind == "number":
            return float(text) if "." in text else int(text)
        if text in ("true", "false"):
            return text == "true"
        if kind == "name":
            if self.pos < len(self.tokens) and self.peek() == "(":  # a call: skip its arguments
                depth = 0
                while True:
                    _, t = self.take()
                    depth += {"(": 1, ")": -1}.get(t, 0)
                    if depth == 0:
                        break
            head, _, prop = text.partition(".")
            if head in self.components:
                self.reads.append((self.components[head], prop))
                return Output()
            return Opaque()
        raise ValueError(f"index.ts: unexpected {text!r}")


def _ts_calls(source: str) -> Iterator[tuple[str, str, Any, list[tuple[str, str]]]]:
    """(variable or "", component token, inputs, outputs read) for each `new gkegpu.X(...)`."""
    tokens = _tokens(source)
    components: dict[str, str] = {}
    reader = _Reader(tokens, components)
    for i, (kind, text) in enumerate(tokens):
        if kind == "name" and text.startswith("gkegpu.") and i and tokens[i - 1][1] == "new":
            variable = tokens[i - 3][1] if i >= 3 and tokens[i - 2][1] == "=" else ""
            token = f"{PACKAGE}:index:{text.removeprefix('gkegpu.')}"
            reader.pos, reader.reads = i + 1, []
            reader.take("(")
            reader.take()  # the resource name
            reader.take(",")
            inputs = reader.value()
            reader.take(")")
            yield variable, token, inputs, reader.reads
            if variable:
                components[variable] = token
    for j, (_, text) in enumerate(tokens):  # outputs read outside the constructors (exports)
        head = text.split(".")[0]
        if head in components and "." in text and tokens[j - 1][1] != "const":
            yield "", "", None, [(components[head], text.partition(".")[2])]


def test_the_typescript_example_fits_the_schema(schema: dict[str, Any]) -> None:
    source = TS_EXAMPLE.read_text(encoding="utf-8")
    calls = list(_ts_calls(source))
    constructed = [token for _, token, _, _ in calls if token]
    assert len(constructed) == source.count("new gkegpu."), "every constructor call was read"
    assert constructed.count(f"{PACKAGE}:index:GpuNodePool") == 2, "a network, a cluster, two pools"
    problems = []
    for variable, token, inputs, reads in calls:
        if token:
            problems += [
                f"{variable or token}: {p}" for p in package_schema.input_problems(schema, token, inputs)
            ]
        problems += _unknown_outputs(schema, reads)
    assert problems == []


def test_the_example_checks_can_fail(schema: dict[str, Any]) -> None:
    source = TS_EXAMPLE.read_text(encoding="utf-8")
    broken = source.replace("gpusPerNode: 1,", "gpusPerNodes: 1,", 1).replace(
        "net.podsRangeName", "net.podRange"
    )
    problems = []
    for _, token, inputs, reads in _ts_calls(broken):
        if token:
            problems += package_schema.input_problems(schema, token, inputs)
        problems += _unknown_outputs(schema, reads)
    assert any("gpusPerNodes: no such property" in p for p in problems), problems
    assert any("gpusPerNode: required, missing" in p for p in problems), problems
    assert any("no output 'podRange'" in p for p in problems), problems


# ---------------------------------------------------------------------------------------------------
# The Python example of docs/library.md, run as a program under mocks.


def _library_python_example() -> str:
    library = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", library, re.S)
    assert len(blocks) == 1, "docs/library.md has one Python program"
    return blocks[0]


def test_the_library_python_example_runs_under_mocks() -> None:
    code = _library_python_example()

    def program() -> dict[str, Any]:
        namespace: dict[str, Any] = {"__name__": "__main__"}
        exec(compile(code, "docs/library.md", "exec"), namespace)  # our own docs' example
        return {}

    result = run_program({"gcp:project": "ml-project-123"}, preview=True, program=program)
    assert result.error is None, f"{type(result.error).__name__}: {result.error}"
    types = [r.type for r in result.resources]
    assert types.count(f"{PACKAGE}:index:GkeNetwork") == 1
    assert types.count(f"{PACKAGE}:index:GkeCluster") == 1
    pools = result.of_type("gcp:container/nodePool:NodePool")  # the cluster's system pool, two GPU pools
    gpus = [p.inputs["nodeConfig"].get("guestAccelerators") for p in pools]
    assert sorted((g[0]["type"], g[0]["count"]) for g in gpus if g) == [
        ("nvidia-h100-80gb", 8),
        ("nvidia-l4", 1),
    ]
    # Every pool runs as the cluster's service account (an output: unknown in a preview), none as
    # Compute Engine's default one (no serviceAccount at all).
    assert [p.inputs["nodeConfig"].get("serviceAccount") for p in pools] == [UNKNOWN] * 3
