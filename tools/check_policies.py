#!/usr/bin/env python3
"""Run the policy pack's rules over an offline render, so CI enforces them without the Pulumi CLI.

    python tools/check_policies.py --stack prod                  # render the stack in-process, check it
    python tools/check_policies.py --stack prod --update         # computed values as `pulumi up` sees them
    python tools/check_policies.py --render render.json          # a `tools/render.py --json` document
    python tools/check_policies.py --stack prod --config policy-config.json

The rules are `POLICIES` of `policy/gke_gpu_policies/rules.py`, the very functions `pulumi preview
--policy-pack policy` runs. Each custom resource of the render becomes the `ResourceValidationArgs` /
`PolicyResource` the engine would send, its "(known after apply)" values turned into pulumi-policy's
unknown sentinels behind the same unknown-checking proxy, so a rule sees what it sees in a preview.

`--config` takes the file `pulumi preview --policy-pack-config` takes: policy name -> enforcement
level, or an object with `enforcementLevel` and the policy's config keys; "all" sets every level.

Prints each violation as `<resource name> [<type>]: <policy>: <message>` and a one-line summary.
Exit codes: 0 no mandatory violation, 1 mandatory violations, 2 invalid input (stack config, render
file or policy config).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import json
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from pulumi_policy import (
        EnforcementLevel,
        Policy,
        PolicyCustomTimeouts,
        PolicyProviderResource,
        PolicyResource,
        PolicyResourceOptions,
        ResourceValidationArgs,
        ResourceValidationPolicy,
        StackValidationArgs,
        StackValidationPolicy,
    )
    from pulumi_policy.policy import _NotApplicableError  # what args.not_applicable() raises
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

    from gke_gpu.stack.stack_file import StackFileError
    from policy.gke_gpu_policies.props import OFFLINE_UNKNOWN
    from policy.gke_gpu_policies.rules import PACK_NAME, POLICIES
    from tools import plan
    from tools.offline import run_stack, stacks
except ModuleNotFoundError as exc:  # not the project's virtualenv: say how to get it, no traceback
    from tools.venv_guard import exit_without_venv

    exit_without_venv(exc, __name__, "tools/check_policies.py")

EXIT_OK, EXIT_VIOLATIONS, EXIT_INVALID = 0, 1, 2
STACK_TYPE = "pulumi:pulumi:Stack"
_LEVELS = {level.value: level for level in EnforcementLevel}
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "array": (list,),
    "object": (dict,),
}


class PolicyConfigError(ValueError):
    """A policy pack config that does not fit the pack's policies and their schemas."""


class Violation(NamedTuple):
    policy: str
    enforcement_level: str  # "mandatory" or "advisory"
    resource_name: str
    resource_type: str
    urn: str | None
    message: str

    @property
    def mandatory(self) -> bool:
        return self.enforcement_level == EnforcementLevel.MANDATORY.value

    def __str__(self) -> str:
        advisory = "" if self.mandatory else " (advisory)"
        return f"{self.resource_name} [{self.resource_type}]: {self.policy}: {self.message}{advisory}"


class _PolicySettings(NamedTuple):
    level: EnforcementLevel
    properties: dict[str, Any]


# --------------------------------------------------------------------------------------------------
# Policy pack config.


def resolve_config(
    config: Mapping[str, Any] | None, policies: Sequence[Policy] = POLICIES
) -> dict[str, _PolicySettings]:
    """Each policy's enforcement level and config properties; raises PolicyConfigError."""
    config = dict(config or {})
    by_name = {p.name: p for p in policies}
    unknown = sorted(set(config) - set(by_name) - {"all"})
    if unknown:
        raise PolicyConfigError(
            f"unknown policy {', '.join(map(repr, unknown))} in the policy config; "
            f"policies of {PACK_NAME}: {', '.join(by_name)}"
        )
    default_level: EnforcementLevel | None = None
    if "all" in config:
        default_level, extra = _split_entry("all", config.pop("all"))
        if extra:
            raise PolicyConfigError(f"'all' only takes an enforcement level, not {', '.join(extra)}")
    settings: dict[str, _PolicySettings] = {}
    for policy in policies:
        level, properties = _split_entry(policy.name, config.get(policy.name))
        schema = policy.config_schema.properties if policy.config_schema else {}
        for key, value in properties.items():
            if key not in schema:
                known = ", ".join(schema) or "none"
                raise PolicyConfigError(f"{policy.name}: unknown config key {key!r} (keys: {known})")
            _check_type(f"{policy.name}.{key}", value, schema[key])
        level = level or default_level or policy.enforcement_level or EnforcementLevel.ADVISORY
        if level is EnforcementLevel.REMEDIATE:
            level = EnforcementLevel.MANDATORY  # what the engine reports for a validation
        settings[policy.name] = _PolicySettings(level, properties)
    return settings


def _split_entry(name: str, entry: Any) -> tuple[EnforcementLevel | None, dict[str, Any]]:
    if entry is None:
        return None, {}
    if isinstance(entry, str):
        return _level(name, entry), {}
    if not isinstance(entry, dict):
        raise PolicyConfigError(f"{name}: expected an enforcement level or an object, got {entry!r}")
    properties = dict(entry)
    level = properties.pop("enforcementLevel", None)
    return (_level(name, level) if level is not None else None), properties


def _level(name: str, value: Any) -> EnforcementLevel:
    if value not in _LEVELS:
        raise PolicyConfigError(f"{name}: enforcement level {value!r} is not one of {', '.join(_LEVELS)}")
    return _LEVELS[value]


def _check_type(path: str, value: Any, schema: Mapping[str, Any]) -> None:
    expected = schema.get("type")
    types = _JSON_TYPES.get(expected or "", (object,))
    if isinstance(value, bool) and bool not in types:
        types = ()
    if expected == "integer" and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, types):
        raise PolicyConfigError(f"{path}: expected {expected}, got {value!r}")
    if "minimum" in schema and value < schema["minimum"]:
        raise PolicyConfigError(f"{path}: {value!r} is below the minimum {schema['minimum']}")


def load_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyConfigError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PolicyConfigError(f"{path} is not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise PolicyConfigError(f"{path}: expected a JSON object of policy name -> config")
    return config


# --------------------------------------------------------------------------------------------------
# Render document -> what the engine sends to a policy pack.


def _engine_value(value: Any) -> Any:
    """The render's "(known after apply)" as the engine's unknown sentinel (a preview's unknown)."""
    if value == OFFLINE_UNKNOWN:
        return UNKNOWN_STRING_VALUE
    if isinstance(value, dict):
        return {k: _engine_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_engine_value(v) for v in value]
    return value


def engine_props(inputs: Mapping[str, Any]) -> Any:
    """A render resource's inputs as a policy sees them in `pulumi preview`."""
    return unknown_checking_proxy(_engine_value(dict(inputs)))


class _Resource(NamedTuple):
    type: str
    name: str
    urn: str
    parent: str | None
    provider: str | None
    # The inputs with the engine's unknown sentinels (_engine_value), converted once per resource; each
    # policy still gets its own proxy over them (props), as the engine deserializes them per policy.
    engine_inputs: dict[str, Any]

    def props(self) -> Any:
        """The inputs as a policy sees them in `pulumi preview` (engine_props); a new proxy each call."""
        return unknown_checking_proxy(self.engine_inputs)


def _custom_resources(document: Mapping[str, Any]) -> list[_Resource]:
    return [
        _Resource(
            r["type"],
            r["name"],
            r["urn"],
            r.get("parent"),
            r.get("provider"),
            _engine_value(dict(r.get("inputs") or {})),
        )
        for r in document["resources"]
        if not r.get("component")
    ]


def _options(resource: _Resource) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=resource.parent,
    )


def _provider(resource: _Resource, by_urn: Mapping[str, _Resource]) -> PolicyProviderResource | None:
    provider = by_urn.get(resource.provider or "")
    if provider is None:
        return None
    return PolicyProviderResource(provider.type, provider.props(), provider.urn, provider.name)


def _run_validation(result: Awaitable[Any] | None) -> None:
    if result is not None and inspect.isawaitable(result):

        async def wait() -> None:
            await result

        asyncio.run(wait())


# --------------------------------------------------------------------------------------------------
# Checking.


def check_document(
    document: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    notes: list[str] | None = None,
) -> list[Violation]:
    """Every violation of the pack's policies in a render document (advisory ones included).

    `config` is a policy pack config (see the module docstring); raises PolicyConfigError. Checks
    the engine would skip (a rule that touched an unknown value, or called not_applicable) are
    appended to `notes` when given.
    """
    settings = resolve_config(config)
    resources = _custom_resources(document)
    by_urn = {r.urn: r for r in resources}
    stack = str(document.get("stack") or "?")
    violations: list[Violation] = []
    skipped = notes if notes is not None else []

    def reporter(policy: Policy, fallback: _Resource | None) -> Callable[[str, str | None], None]:
        def report_violation(message: str, urn: str | None = None) -> None:
            # A resource policy's violations always belong to its resource (as in the engine).
            target = fallback or by_urn.get(urn or "")
            violations.append(
                Violation(
                    policy=policy.name,
                    enforcement_level=settings[policy.name].level.value,
                    resource_name=target.name if target else stack,
                    resource_type=target.type if target else STACK_TYPE,
                    urn=target.urn if target else None,
                    message=message,
                )
            )

        return report_violation

    def run(policy: Policy, call: Callable[[], Awaitable[Any] | None], where: str) -> None:
        try:
            _run_validation(call())
        except UnknownValueError as exc:
            skipped.append(f"{policy.name} on {where}: can't run during preview: {exc.message}")
        except _NotApplicableError as exc:
            skipped.append(f"{policy.name} on {where}: not applicable: {exc.message}")

    active = [p for p in POLICIES if settings[p.name].level is not EnforcementLevel.DISABLED]
    for policy in active:
        if not isinstance(policy, ResourceValidationPolicy):
            continue
        for r in resources:
            args = ResourceValidationArgs(
                r.type,
                r.props(),
                r.urn,
                r.name,
                _options(r),
                _provider(r, by_urn),
                dict(settings[policy.name].properties),
            )
            run(policy, functools.partial(policy.validate, args, reporter(policy, r)), r.name)

    stack_resources = _policy_resources(resources, by_urn)
    for policy in active:
        if isinstance(policy, StackValidationPolicy):
            stack_args = StackValidationArgs(stack_resources, dict(settings[policy.name].properties))
            validate = functools.partial(policy.validate, stack_args, reporter(policy, None))
            run(policy, validate, f"stack {stack}")
    return violations


def _policy_resources(
    resources: Sequence[_Resource], by_urn: Mapping[str, _Resource]
) -> list[PolicyResource]:
    result = {
        r.urn: PolicyResource(
            r.type,
            r.props(),
            r.urn,
            r.name,
            _options(r),
            _provider(r, by_urn),
            None,
            [],
            {},
        )
        for r in resources
    }
    for r in resources:
        if r.parent in result:
            result[r.urn].parent = result[r.parent]
    return list(result.values())


def summary(stack: str, violations: Sequence[Violation], resources: int) -> str:
    mandatory = sum(1 for v in violations if v.mandatory)
    advisory = len(violations) - mandatory
    verdict = "FAILED" if mandatory else "passed"
    return (
        f"policy check {verdict}: stack {stack}, {resources} resources, {len(POLICIES)} policies of "
        f"{PACK_NAME}: {mandatory} mandatory and {advisory} advisory violation(s)"
    )


def report(document: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The pack's verdict on a render document as data: what `tools/render.py` stores under
    ``policy`` and prints before the tree. Raises PolicyConfigError for a bad `config`."""
    notes: list[str] = []
    violations = check_document(document, config, notes=notes)
    resources = sum(1 for r in document["resources"] if not r.get("component"))
    mandatory = sum(1 for v in violations if v.mandatory)
    return {
        "pack": PACK_NAME,
        "checked": True,
        "policies": len(POLICIES),
        "passed": mandatory == 0,
        "mandatory": mandatory,
        "advisory": len(violations) - mandatory,
        "summary": summary(str(document.get("stack")), violations, resources),
        "violations": [
            {
                "policy": v.policy,
                "enforcementLevel": v.enforcement_level,
                "resource": v.resource_name,
                "type": v.resource_type,
                "urn": v.urn,
                "message": v.message,
            }
            for v in violations
        ],
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Check a stack's offline render against {PACK_NAME}.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help=f"render this stack in-process ({', '.join(stacks())})")
    source.add_argument(
        "--render", type=Path, metavar="FILE.json", help="a `tools/render.py --json` document"
    )
    parser.add_argument("--config", type=Path, metavar="FILE.json", help="policy pack config")
    parser.add_argument(
        "--update",
        action="store_true",
        help="with --stack: computed values as `pulumi up` sees them (offline stand-ins), not unknown",
    )
    args = parser.parse_args(argv)
    if args.update and args.stack is None:
        parser.error("--update renders a stack: use it with --stack")

    try:
        config = load_config(args.config) if args.config else None
        resolve_config(config)
    except PolicyConfigError as exc:
        print(f"error: policy config: {exc}", file=sys.stderr)
        return EXIT_INVALID

    if args.render is not None:
        try:
            document = plan.load_document(args.render)
        except plan.NotARenderError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_INVALID
    else:
        try:
            result = run_stack(args.stack, preview=not args.update)
        except FileNotFoundError as exc:
            print(f"error: {exc}; stacks: {', '.join(stacks())}", file=sys.stderr)
            return EXIT_INVALID
        except StackFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_INVALID
        if result.error is not None:
            from gke_gpu.stack.config import ConfigError

            if isinstance(result.error, (ConfigError, StackFileError)):
                print(f"error: stack {args.stack}: {result.error}", file=sys.stderr)
                return EXIT_INVALID
            raise result.error
        document = plan.to_document(result)

    notes: list[str] = []
    violations = check_document(document, config, notes=notes)
    for violation in violations:
        print(violation)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    resources = sum(1 for r in document["resources"] if not r.get("component"))
    print(summary(str(document.get("stack")), violations, resources))
    return EXIT_VIOLATIONS if any(v.mandatory for v in violations) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
