#!/usr/bin/env python3
"""The floor of a render: a stack's declarations replayed on the bare SDKs, and nothing else.

    .venv/bin/python tools/floor_program.py SPEC.json [--verify]

SPEC.json is what `tools/benchmark.py` writes from a real render (`write_spec`): each resource's type
token, name, parent, provider and inputs, and the stack outputs. This program declares the same
resources, in the same order, under the same mocks (`tools.offline.run_program`), each through the
SDK class that owns its type token (`pulumi_gcp.container.NodePool`, `pulumi_kubernetes.batch.v1.Job`,
...; a Kubernetes kind without one as `apiextensions.CustomResource`; the program's own components as
plain `pulumi.ComponentResource`s), so it imports the SDK modules the real
render needs for them and pays the SDKs' own cost per resource; then it prints what it declared as
JSON. No stack file, no validation, no policy pack, no `gke_gpu`: what a render costs over this is
what the program costs. `--verify` also checks that the recorded declarations equal the spec's.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pulumi
from pulumi.runtime.rpc import get_resource_module

if TYPE_CHECKING:
    from tools.offline import RunResult

# The modules of gke_gpu that tools/offline.py imports (the stack file's reader, the secrets provider's
# check), which the floor never calls.
STAND_INS = ("gke_gpu.stack.stack_file", "gke_gpu.stack.secrets_provider")
# Packages whose components (a Helm chart) are the SDK's classes, not the program's own.
SDK_PACKAGES = ("kubernetes", "gcp")
FIELDS = ("urn", "type", "name", "custom", "parent", "provider", "inputs", "alias_types")


class FloorError(Exception):
    """A declaration the floor cannot replay."""


def sdk_class(type_token: str) -> type[pulumi.Resource] | None:
    """The SDK class a type token names (`gcp:container/nodePool:NodePool` -> NodePool); None for a
    Kubernetes kind the SDK has no class for (a custom resource)."""
    package, module, _ = type_token.split(":")
    if package == "pulumi" and module == "providers":
        sdk = type_token.rsplit(":", 1)[1]
        return importlib.import_module(f"pulumi_{sdk}").Provider
    importlib.import_module(f"pulumi_{package}")  # registers the SDK's resource modules
    found = get_resource_module(package, module, "")
    info = getattr(found, "mod_info", None)
    if info is None or type_token not in info["classes"]:
        if package == "kubernetes":
            return None
        raise FloorError(f"no SDK class for {type_token}")
    return getattr(importlib.import_module(info["fqn"]), info["classes"][type_token])


_PARAMETERS: dict[type, dict[str, str]] = {}


def keyword_arguments(cls: type[pulumi.Resource], inputs: dict[str, Any]) -> dict[str, Any]:
    """Recorded (engine, camelCase) top-level inputs as the class's keyword arguments; nested
    values stay as recorded (the SDK passes dict keys it does not know through unchanged)."""
    names = _PARAMETERS.get(cls)
    if names is None:
        init: Callable[..., Any] = getattr(cls, "_internal_init", cls.__init__)
        names = {}
        for parameter in inspect.signature(init).parameters:
            head, *rest = parameter.split("_")
            names[head + "".join(part[:1].upper() + part[1:] for part in rest)] = parameter
        _PARAMETERS[cls] = names
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise FloorError(f"{cls.__name__} has no argument for {unknown}")
    return {names[key]: value for key, value in inputs.items()}


def declare(spec: dict[str, Any]) -> dict[str, Any]:
    """Declare the spec's resources; return its outputs (as plain values)."""
    made: dict[str, pulumi.Resource] = {}
    for entry in spec["resources"]:
        provider = made.get((entry["provider"] or "").rsplit("::", 1)[0])
        if provider is not None and not isinstance(provider, pulumi.ProviderResource):
            raise FloorError(f"{entry['urn']}'s provider {entry['provider']} is not a provider")
        opts = pulumi.ResourceOptions(parent=made.get(entry["parent"] or ""), provider=provider)
        sdk_component = not entry["custom"] and entry["type"].split(":")[0] in SDK_PACKAGES
        if not entry["custom"] and not sdk_component:
            opts.aliases = [pulumi.Alias(type_=t) for t in entry["alias_types"]]
            component = pulumi.ComponentResource(entry["type"], entry["name"], None, opts)
            component.register_outputs({})
            made[entry["urn"]] = component
            continue
        cls, inputs = sdk_class(entry["type"]), entry["inputs"]
        if cls is None:  # as the program declares one: apiextensions.CustomResource, fields as given
            from pulumi_kubernetes.apiextensions import CustomResource

            fields = {key: value for key, value in inputs.items() if key not in ("apiVersion", "kind")}
            made[entry["urn"]] = CustomResource(
                entry["name"], inputs["apiVersion"], inputs["kind"], opts=opts, **fields
            )
            continue
        if issubclass(cls, pulumi.ProviderResource):  # the SDK sent booleans and numbers as JSON
            inputs = {key: _scalar(value) for key, value in inputs.items()}
        # A generated SDK class takes (resource_name, opts, **inputs), which its base's __init__
        # (t, name, props, opts) does not say: called as what it is.
        constructor: Callable[..., pulumi.Resource] = cls
        made[entry["urn"]] = constructor(entry["name"], opts, **keyword_arguments(cls, inputs))
    return dict(spec["outputs"])


def _scalar(value: Any) -> Any:
    try:
        decoded = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return value
    return decoded if isinstance(decoded, (bool, int, float)) else value


def document(result: RunResult) -> dict[str, Any]:
    resources = [{key: getattr(r, key) for key in FIELDS} for r in result.resources]
    return {"stack": result.stack, "resources": resources, "outputs": result.outputs}


def mismatches(spec: dict[str, Any], floor: dict[str, Any]) -> list[str]:
    """Where the floor's recorded declarations differ from the spec's (empty: the same)."""
    want = {r["urn"]: {k: v for k, v in r.items() if k in FIELDS} for r in spec["resources"]}
    got = {r["urn"]: r for r in json.loads(json.dumps(floor["resources"]))}
    problems = [f"{urn} not declared" for urn in want.keys() - got.keys()]
    problems += [f"{urn} not in the spec" for urn in got.keys() - want.keys()]
    return problems + [
        f"{urn}: {key} differs"
        for urn in sorted(want.keys() & got.keys())
        for key in FIELDS
        if json.dumps(want[urn][key], sort_keys=True) != json.dumps(got[urn][key], sort_keys=True)
    ]


def keep_gke_gpu_out() -> None:
    """tools.offline reads stack files with gke_gpu's reader, which the floor never calls: stand-ins
    keeps the program's package (and what it imports) out of the floor's process. Only for a process
    of its own: the stand-in replaces the reader for everything else in the process too."""
    for name in STAND_INS:
        if name not in sys.modules:
            stand_in = types.ModuleType(name)
            stand_in.__getattr__ = lambda name: None  # type: ignore[method-assign]
            sys.modules[name] = stand_in


def main(argv: list[str] | None = None) -> int:
    from tools.offline import run_program

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--verify", action="store_true", help="check the declarations against the spec")
    args = parser.parse_args(argv)
    spec = json.loads(args.spec.read_text())
    result = run_program({}, stack=spec["stack"], program=lambda: declare(spec))
    if isinstance(result.error, FloorError):
        print(f"floor: {result.error}", file=sys.stderr)
        return 1
    if result.error is not None:
        raise result.error
    floor = document(result)
    print(json.dumps(floor, indent=2, sort_keys=True))
    if args.verify:
        problems = mismatches(spec, floor)
        if any(m.startswith("gke_gpu") and m not in STAND_INS for m in sys.modules):
            problems.append("the floor imported gke_gpu")
        for problem in problems:
            print(f"floor: {problem}", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    keep_gke_gpu_out()
    sys.exit(main())
