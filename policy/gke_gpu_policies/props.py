"""Reading resource properties that may be missing or not yet known.

A policy sees three kinds of "no value":

* missing (the key is absent, or None): the program did not set it. Rules decide what that means
  (usually: the provider or GKE default applies).
* unknown during a real `pulumi preview`: the engine passes unknowns (KeepUnknowns) as pulumi-policy's
  sentinel strings, and pulumi-policy wraps the props in a proxy that raises `UnknownValueError` on
  access. A rule that lets that exception escape is skipped whole, with an advisory "can't run policy"
  note; these helpers turn it into `UNKNOWN` so that the rule's other checks still run.
* unknown in the offline render (`tools/render.py`): the marker string "(known after apply)", and
  "[secret]" markers for secrets that the render does not show.

Rules must treat `UNKNOWN` as "cannot check", never as a violation. The props are `Mapping` and
`Sequence` proxies, not dicts and lists: never test them with `isinstance(x, dict)`.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
)

# The offline render's markers (tools/offline.py UNKNOWN, SECRET, SECRET_NOT_DECRYPTED; a test keeps
# them in step, the pack cannot import tools/).
OFFLINE_UNKNOWN: Final = "(known after apply)"
OFFLINE_SECRETS: Final = ("[secret]", "[secret: not decrypted offline]")

_UNKNOWN_STRINGS: Final = frozenset(
    {
        OFFLINE_UNKNOWN,
        *OFFLINE_SECRETS,
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_OBJECT_VALUE,
        UNKNOWN_STRING_VALUE,
    }
)


class _Unknown(enum.Enum):
    """The one value that means "not known until the resource exists". An enum of one member, so
    that `value is UNKNOWN` narrows a `T | _Unknown` to `T` for the type checker."""

    UNKNOWN = "UNKNOWN"

    def __repr__(self) -> str:
        return "UNKNOWN"

    __str__ = __repr__  # in a message, as before it was an enum

    def __bool__(self) -> bool:
        raise TypeError("UNKNOWN has no truth value: test `is UNKNOWN` first")


UNKNOWN: Final = _Unknown.UNKNOWN


def is_unknown(value: Any) -> bool:
    """True for UNKNOWN, pulumi-policy's unknown sentinels and the offline render's markers."""
    return value is UNKNOWN or (isinstance(value, str) and value in _UNKNOWN_STRINGS)


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def get(value: Any, *path: str | int) -> Any:
    """The value at `path` (keys and list indexes): the value, None if missing, or UNKNOWN.

    A value of the wrong shape on the way (a string where a mapping was expected) counts as missing.
    """
    current = value
    for part in path:
        if is_unknown(current):
            return UNKNOWN
        try:
            if isinstance(part, int):
                if not _is_list(current) or not -len(current) <= part < len(current):
                    return None
                current = current[part]
            else:
                if not isinstance(current, Mapping):
                    return None
                current = current[part]
        except KeyError:
            return None
        except UnknownValueError:
            return UNKNOWN
        if current is None:
            return None
    return UNKNOWN if is_unknown(current) else current


def items(value: Any) -> list[Any] | _Unknown | None:
    """A list's elements (each unknown one as UNKNOWN), None if missing, UNKNOWN if unknown."""
    if value is None:
        return None
    if is_unknown(value):
        return UNKNOWN
    if not _is_list(value):
        return None
    return [get(value, index) for index in range(len(value))]


def known_items(value: Any) -> list[Any]:
    """A list's elements as `items` gives them, or [] when the list is missing or not known yet: for a
    rule that checks only what it can see (an unknown list hides nothing it could report)."""
    found = items(value)
    return [] if found is UNKNOWN or found is None else found


def entries(value: Any) -> dict[str, Any] | _Unknown | None:
    """A mapping's entries (each unknown value as UNKNOWN), None if missing, UNKNOWN if unknown."""
    if value is None:
        return None
    if is_unknown(value):
        return UNKNOWN
    if not isinstance(value, Mapping):
        return None
    return {key: get(value, key) for key in value}


def as_int(value: Any) -> int | _Unknown | None:
    """A whole number (1, 1.0 and "1" all count; pulumi-policy passes numbers as floats).

    UNKNOWN if unknown; None if missing or not a whole number.
    """
    if is_unknown(value):
        return UNKNOWN
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"\+?[0-9]+", value.strip()):
        return int(value)
    return None


def stack_of(urn: str) -> str | None:
    """The stack name in a URN (`urn:pulumi:<stack>::<project>::<type>::<name>`).

    pulumi-policy 1.21 gives validators no stack name; the URN always carries it. Falls back to
    PULUMI_STACK, which the CLI sets for a policy pack's process.
    """
    match = re.match(r"urn:pulumi:([^:]+)::", urn or "")
    if match:
        return match.group(1)
    return os.environ.get("PULUMI_STACK") or None
