"""What the core rule modules (`pools`, `capacity`, `nodes`, `workloads`) build on: the message format,
a policy's config values, and the defaults pulumi-gcp fills in.

`_report` words every violation as `<subject>: <text> [<policy>]`. `_setting` reads a policy's config
value or its schema's default; `_prod_match` applies the `prodStackPattern` two policies share. The
engine runs the provider's `Check` before a policy sees the props, so a field the program left out
carries pulumi-gcp's default there; the offline render has no `Check`, so `_effective` fills in the
same defaults (`_PROVIDER_DEFAULTS`) and both agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import PolicyConfigSchema, ReportViolation

from .props import get

# Defaults pulumi-gcp fills in during `Check`.
_PROVIDER_DEFAULTS: dict[tuple[str, ...], bool] = {
    ("deletionProtection",): True,
    ("enableShieldedNodes",): True,
    ("shieldedInstanceConfig", "enableSecureBoot"): False,
    ("shieldedInstanceConfig", "enableIntegrityMonitoring"): True,
    ("spot",): False,
    ("preemptible",): False,
}

# Config schemas: JSON schema properties; "default" is what a validator uses when the key is unset.
PROD_PATTERN_PROPERTY: dict[str, Any] = {
    "type": "string",
    "default": "prod",
    "description": "Regular expression (re.search) for the names of production stacks.",
}


def _report(
    report_violation: ReportViolation, policy: str, subject: str, text: str, urn: str | None = None
) -> None:
    message = f"{subject}: {text} [{policy}]"
    if urn is None:
        report_violation(message, None)
    else:
        report_violation(message, urn)


def _setting(config: Mapping[str, Any] | None, schema: PolicyConfigSchema, key: str) -> Any:
    """A policy's config value, or its schema default."""
    value = (config or {}).get(key)
    return schema.properties[key]["default"] if value is None else value


def _effective(node_config: Any, *path: str) -> Any:
    """A field of nodeConfig (or of a Cluster), the provider default when missing, or UNKNOWN."""
    value = get(node_config, *path)
    if value is None:
        return _PROVIDER_DEFAULTS.get(path)
    return value


def _prod_match(
    stack: str | None, config: Mapping[str, Any] | None, schema: PolicyConfigSchema
) -> bool | str:
    """True/False, or an error text when prodStackPattern is not a valid regular expression."""
    pattern = _setting(config, schema, "prodStackPattern")
    try:
        return bool(stack) and re.search(pattern, stack or "") is not None
    except (re.error, TypeError) as exc:
        return f"config prodStackPattern {pattern!r} is not a valid regular expression ({exc})"
