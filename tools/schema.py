"""The gke-gpu package schema: generate it, check it, and document it.

    .venv/bin/python tools/schema.py             # check: schema.json current and valid, docs in sync
    .venv/bin/python tools/schema.py --update    # write provider/schema.json and docs/components.md
    .venv/bin/python tools/schema.py --markdown  # write only docs/components.md (from schema.json)

The schema is what `pulumi package add .../provider` would get from the plugin (provider/__main__.py):
the same `ComponentProvider` over the same component list (gke_gpu.PUBLIC_COMPONENTS),
run in-process, so no Pulumi CLI is needed. The version written into it is the one in
pyproject.toml, so the committed file changes only when the API or the version does.
`provider/schema.json` is the API's golden file: a diff in it is the API review (CHANGELOG.md says
which diffs are breaking). It is checked against Pulumi's package metaschema, vendored in
tools/pulumi_metaschema/ (SOURCE.md there says from where).

Exit status: 0 in sync and valid; 1 drift, invalid schema, or a component the analyzer refuses;
2 a Python without the project's virtualenv.
"""

import argparse
import difflib
import inspect
import json
import re
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    import jsonschema
    import pulumi

    from gke_gpu import public_components
    from gke_gpu.core.package import PACKAGE
    from gke_gpu.core.provider import GkeGpuComponentProvider
    from tools.pulumi_provider import ComponentProvider  # first: it reconciles the SDK's and Google's protos
except ModuleNotFoundError as exc:  # not the project's virtualenv: say how to get it, no traceback
    from tools.venv_guard import exit_without_venv

    exit_without_venv(exc, __name__, "tools/schema.py")

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "provider" / "schema.json"
METASCHEMA_PATH = ROOT / "tools" / "pulumi_metaschema" / "pulumi.json"
# The generated component reference (the name predates its move out of README.md).
README_PATH = ROOT / "docs" / "components.md"
START = "<!-- component-reference:start -->"
END = "<!-- component-reference:end -->"
UPDATE_COMMAND = ".venv/bin/python tools/schema.py --update"


class SchemaError(Exception):
    """The analyzer refused one or more components; the message names each with its error."""


# The analyzer's errors that do not say what is wrong (reference: pulumi-component-package.md §1.4).
HINTS = {
    "has no attribute '__mro__'": "its module uses `from __future__ import annotations`",
    "issubclass() arg 1 must be a class": "an annotation is a Literal, a Callable or a list['Quoted']",
    "requires an argument named 'args'": "its __init__ needs a parameter `args` annotated with a TypedDict",
}


def _describe(cls: type, exc: Exception) -> str:
    text = f"{cls.__name__}: {type(exc).__name__}: {exc}"
    hints = [hint for needle, hint in HINTS.items() if needle in str(exc)]
    return text + "".join(f" (likely: {h})" for h in hints)


def pinned_version() -> str:
    """The package version written into the schema: pyproject.toml's [project].version."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def provider(
    components: Sequence[type[pulumi.ComponentResource]] | None = None, version: str | None = None
) -> ComponentProvider:
    """The provider the plugin serves (all public components by default), with the pinned version.

    Raises SchemaError naming every component the analyzer refuses (it stops at the first one
    otherwise, and some of its errors carry no component name)."""
    classes = list(components) if components is not None else public_components()
    version = version or pinned_version()
    try:
        return GkeGpuComponentProvider(classes, PACKAGE, version=version)
    except Exception:
        problems = []
        for cls in classes:
            try:
                ComponentProvider([cls], PACKAGE, version=version)
            except Exception as exc:
                problems.append(_describe(cls, exc))
        if not problems:  # each alone is fine: the conflict is between them (e.g. a duplicate type name)
            raise
        raise SchemaError("the analyzer refuses:\n  " + "\n  ".join(problems)) from None


def generate(components: Sequence[type[pulumi.ComponentResource]] | None = None) -> dict[str, Any]:
    """The package schema of the components, as the plugin's GetSchema would return it."""
    schema = provider(components).schema
    if schema is None:  # Provider.schema is optional; a ComponentProvider always sets it
        raise SchemaError("the component provider has no schema")
    return json.loads(schema)


def serialize(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load_committed() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def drift(committed: str, current: str, limit: int = 60) -> str:
    """A unified diff from the committed schema to the current one (cut at `limit` lines)."""
    lines = list(
        difflib.unified_diff(
            committed.splitlines(), current.splitlines(), "provider/schema.json", "current", lineterm=""
        )
    )
    if len(lines) > limit:
        lines = [*lines[:limit], f"... ({len(lines) - limit} more lines)"]
    return "\n".join(lines)


def plugin_schema(python: str | Path, plugin_dir: Path, timeout: float = 60) -> tuple[str, dict[str, Any]]:
    """Start the plugin as the Pulumi CLI does (`python <plugin dir> <engine address>`), read its port,
    and ask it over gRPC for its version (GetPluginInfo) and schema (GetSchema).

    The engine address is a dummy: neither call reaches the engine. Raises RuntimeError with the
    plugin's stderr if it exits, or is silent for `timeout` seconds, before printing its port."""
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

    with (
        tempfile.TemporaryFile(mode="w+") as stderr,
        subprocess.Popen(
            [str(python), str(plugin_dir), "127.0.0.1:1"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=plugin_dir.parent,
        ) as proc,
    ):
        watchdog = threading.Timer(timeout, proc.kill)
        try:
            assert proc.stdout is not None
            watchdog.start()
            first = proc.stdout.readline().strip()
            watchdog.cancel()
            if not first.isdigit():
                proc.kill()
                proc.wait()
                stderr.seek(0)
                raise RuntimeError(f"the plugin printed {first!r}, not its port:\n{stderr.read()}")
            with grpc.insecure_channel(f"127.0.0.1:{first}") as channel:
                stub = provider_pb2_grpc.ResourceProviderStub(channel)
                info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=timeout)
                reply = stub.GetSchema(provider_pb2.GetSchemaRequest(), timeout=timeout)
            return info.version, json.loads(reply.schema)
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


# ---------------------------------------------------------------------------------------------------
# Inputs checked against the schema (the examples in docs/ and the tests' wire data).


class Output:
    """Stands for a value that is another resource's output (unknown when the program runs)."""


class Opaque:
    """Stands for an expression whose value is known when the program runs but not read here."""


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def input_problems(schema: Mapping[str, Any], token: str, inputs: Any) -> list[str]:
    """How `inputs` (camelCase, as YAML, TypeScript or the engine give them) break the schema of the
    component `token`: unknown properties at any depth, missing required inputs, wrong literal types,
    outputs given to plain properties. Empty: it fits."""
    resource = schema["resources"].get(token)
    if resource is None:
        return [f"{token}: no such component in the schema"]
    props, required = resource.get("inputProperties", {}), resource.get("requiredInputs", [])
    return _object_problems(schema, props, required, inputs, "")


def _object_problems(
    schema: Mapping[str, Any], props: Mapping[str, Any], required: Sequence[str], value: Any, path: str
) -> list[str]:
    if isinstance(value, (Output, Opaque)):
        return []
    if not isinstance(value, Mapping):
        return [f"{path or '(inputs)'}: expected an object, got {value!r}"]
    problems = [f"{_join(path, k)}: required, missing" for k in required if k not in value]
    for key, item in value.items():
        if key not in props:
            problems.append(f"{_join(path, key)}: no such property (known: {', '.join(sorted(props))})")
        else:
            problems += _value_problems(schema, props[key], item, _join(path, key))
    return problems


_LITERAL_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int, float),
    "number": (int, float),
}


def _value_problems(schema: Mapping[str, Any], prop: Mapping[str, Any], value: Any, path: str) -> list[str]:
    if isinstance(value, Output):
        return (
            [f"{path}: plain, so it takes a value, not another resource's output"]
            if prop.get("plain")
            else []
        )
    if isinstance(value, Opaque):
        return []
    ref = prop.get("$ref", "")
    if ref.startswith("#/types/"):
        spec = schema["types"][ref.removeprefix("#/types/")]
        if "enum" in spec:
            allowed = [e["value"] for e in spec["enum"]]
            return [] if value in allowed else [f"{path}: {value!r} is not one of {allowed}"]
        return _object_problems(schema, spec.get("properties", {}), spec.get("required", []), value, path)
    if ref:  # pulumi.json#/Any, an asset, a resource of another provider
        return []
    kind = prop.get("type")
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {value!r}"]
        return [
            p for i, v in enumerate(value) for p in _value_problems(schema, prop["items"], v, f"{path}[{i}]")
        ]
    if kind == "object":
        if not isinstance(value, Mapping):
            return [f"{path}: expected a map, got {value!r}"]
        inner = prop.get("additionalProperties", {})
        return [p for k, v in value.items() for p in _value_problems(schema, inner, v, f"{path}.{k}")]
    expected = _LITERAL_TYPES.get(str(kind))
    if expected is None:
        return []
    wrong = not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool))
    if kind == "integer" and not wrong and not float(value).is_integer():
        wrong = True
    return [f"{path}: expected {kind}, got {value!r}"] if wrong else []


# ---------------------------------------------------------------------------------------------------
# Pulumi's metaschema.


def metaschema() -> dict[str, Any]:
    """Pulumi's package metaschema, its Go/ECMAScript named groups `(?<name>` rewritten to Python's
    `(?P<name>` (look-behinds `(?<=`, `(?<!` are left alone)."""
    text = METASCHEMA_PATH.read_text(encoding="utf-8")
    return json.loads(re.sub(r"\(\?<(?=[A-Za-z_])", "(?P<", text))


def as_pulumi_reads_it(value: Any) -> Any:
    """The schema as Pulumi validates it: the CLI unmarshals it into Go structs and validates them
    marshalled again (`validateSpec`, pkg/codegen/schema/bind.go), so a `"description": null` (the
    SDK writes one for an enum member without a docstring) becomes "" and is omitted (`omitempty`)."""
    if isinstance(value, Mapping):
        return {k: as_pulumi_reads_it(v) for k, v in value.items() if not (k == "description" and v is None)}
    if isinstance(value, list):
        return [as_pulumi_reads_it(v) for v in value]
    return value


def metaschema_errors(schema: Mapping[str, Any]) -> list[str]:
    """Every way `schema` breaks Pulumi's metaschema, as `path: message` lines (empty: valid)."""
    meta = metaschema()
    validator_class = jsonschema.validators.validator_for(meta)
    validator_class.check_schema(meta)
    validator = validator_class(meta, format_checker=validator_class.FORMAT_CHECKER)
    errors = sorted(
        validator.iter_errors(as_pulumi_reads_it(schema)), key=lambda e: list(map(str, e.absolute_path))
    )
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]


# ---------------------------------------------------------------------------------------------------
# The component reference (docs/components.md): every component's inputs and outputs, and the types they use.


def _short(ref: str) -> str:
    return ref.rsplit(":", 1)[-1]


def type_text(prop: Mapping[str, Any]) -> str:
    """A property's type in words: `string`, `list of string`, `map of integer`, `GpuConfig`,
    `gcp:compute/network:Network`, `any`."""
    if "$ref" in prop:
        ref = prop["$ref"]
        if ref.startswith("#/types/"):
            return f"`{_short(ref)}`"
        if ref.startswith("pulumi.json#/"):
            return ref.removeprefix("pulumi.json#/").lower()
        # An external resource: /gcp/v10.2.0/schema.json#/resources/gcp:compute%2Fnetwork:Network
        return f"`{unquote(ref.rsplit('/', 1)[-1])}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {type_text(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop:
        return f"map of {type_text(prop['additionalProperties'])}"
    return str(kind)


def _cell(text: str | None) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(inspect.cleandoc(text or "").split()).replace("|", "\\|")


def _first_paragraph(text: str | None) -> str:
    return _cell(inspect.cleandoc(text or "").split("\n\n", 1)[0])


def _property_rows(props: Mapping[str, Any], required: Sequence[str], with_required: bool) -> list[str]:
    rows = []
    for name in sorted(props, key=lambda n: (n not in required, n)):
        prop = props[name]
        kind = type_text(prop) + (", plain" if prop.get("plain") else "")
        cells = [f"`{name}`", kind]
        if with_required:
            cells.append("yes" if name in required else "")
        cells.append(_cell(prop.get("description")))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def markdown(schema: Mapping[str, Any]) -> str:
    """The reference (docs/components.md, under `# Component reference`): a heading per component
    with a table of its inputs and one of its outputs, then the types they use."""
    out = [
        f"<!-- generated by `{UPDATE_COMMAND}` (or --markdown) from provider/schema.json: do not edit -->",
        "",
        f"Package `{schema['name']}` {schema['version']}. Inputs are camelCase here and in YAML and",
        "TypeScript, snake_case in Python. *plain*: the value must be known when the program runs",
        "(not an output of another resource); it decides which resources exist.",
    ]
    for token, resource in schema.get("resources", {}).items():
        summary = _first_paragraph(resource.get("description"))
        out += ["", f"#### {_short(token)}", "", f"`{token}`: {summary}"]
        required = resource.get("requiredInputs", [])
        out += ["", "| Input | Type | Required | Description |", "| --- | --- | --- | --- |"]
        out += _property_rows(resource.get("inputProperties", {}), required, with_required=True)
        outputs = resource.get("properties", {})
        if outputs:
            out += ["", "| Output | Type | Description |", "| --- | --- | --- |"]
            out += _property_rows(outputs, resource.get("required", []), with_required=False)
    types = schema.get("types", {})
    if types:
        out += ["", "#### Types"]
        for token in sorted(types, key=_short):
            spec = types[token]
            out += ["", f"##### {_short(token)}", ""]
            if spec.get("description"):
                out += [_first_paragraph(spec["description"]), ""]
            if "enum" in spec:
                out += ["| Value | Description |", "| --- | --- |"]
                out += [f"| `{v['value']}` | {_cell(v.get('description'))} |" for v in spec["enum"]]
            else:
                out += ["| Property | Type | Required | Description |", "| --- | --- | --- | --- |"]
                props, required = spec.get("properties", {}), spec.get("required", [])
                out += _property_rows(props, required, with_required=True)
    return "\n".join(out)


_SECTION = re.compile(re.escape(START) + r"\n(.*?)" + re.escape(END), re.S)


def readme_section(readme: str) -> str | None:
    """The generated block of docs/components.md (between the markers), or None if the markers are missing."""
    match = _SECTION.search(readme)
    return match.group(1).rstrip("\n") if match else None


def with_section(readme: str, section: str) -> str:
    if readme_section(readme) is None:
        raise SystemExit(f"docs/components.md lacks the markers {START} ... {END}")
    return _SECTION.sub(lambda _: f"{START}\n{section}\n{END}", readme, count=1)


# ---------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--update", action="store_true", help="write provider/schema.json and docs/components.md"
    )
    parser.add_argument(
        "--markdown", action="store_true", help="write docs/components.md from provider/schema.json only"
    )
    args = parser.parse_args(argv)

    status = 0
    if not args.markdown or args.update:
        try:
            current = generate()
        except SchemaError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        errors = metaschema_errors(current)
        for line in errors:
            print(f"error: the schema breaks Pulumi's metaschema: {line}", file=sys.stderr)
        status = 1 if errors else 0
        text = serialize(current)
        committed = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
        if args.update:
            if committed != text:
                SCHEMA_PATH.write_text(text, encoding="utf-8")
                print(f"wrote {SCHEMA_PATH.relative_to(ROOT)}")
        elif committed != text:
            print(drift(committed, text), file=sys.stderr)
            print(f"error: provider/schema.json is out of date: review the diff, then {UPDATE_COMMAND}")
            status = 1

    readme = README_PATH.read_text(encoding="utf-8")
    section = markdown(load_committed()) if SCHEMA_PATH.exists() else None
    if args.update or args.markdown:
        if section is not None:
            updated = with_section(readme, section)
            if updated != readme:
                README_PATH.write_text(updated, encoding="utf-8")
                print("wrote docs/components.md (component reference)")
    elif section is not None and readme_section(readme) != section:
        if readme_section(readme) is None:
            print(f"error: docs/components.md lacks the markers {START} ... {END}")
        else:
            print(f"error: docs/components.md is out of date: {UPDATE_COMMAND}")
        status = 1
    if status == 0 and not (args.update or args.markdown):
        print("provider/schema.json: current and valid; docs/components.md in sync")
    return status


if __name__ == "__main__":
    sys.exit(main())
