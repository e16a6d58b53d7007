"""One engine config value, the program's side of the stack file's contract (stack/stack_file.py): the
engine's string for one key, decoded as JSON with the stack file's bounds (``json.loads`` recurses)."""

from __future__ import annotations

import json
import re
from typing import Any

from .yaml_composer import MAX_DEPTH, MAX_VALUE_CHARS, StackFileError, clip, cut

# A JSON string (to the end of the text if it is not closed: no backtracking, linear time) or a bracket.
_BRACKETS = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.DOTALL)


def _json_depth_over(text: str, limit: int) -> bool:
    depth = 0
    for match in _BRACKETS.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def decode_config_value(key: str, text: str) -> Any:
    """The engine's string for `key` decoded as JSON, or the string itself when it is not JSON.

    Exactly `json.loads(text)` for every value within the bounds; raises StackFileError naming the
    key for a value over `MAX_VALUE_CHARS` characters, nested deeper than `MAX_DEPTH` levels, or
    holding a number too long for Python to convert.
    """
    if not isinstance(text, str):
        return text
    if len(text) > MAX_VALUE_CHARS:
        raise StackFileError(
            f"{key}: the value is {len(text):,} characters long; a config value may have at most "
            f"{MAX_VALUE_CHARS:,}"
        )
    if _json_depth_over(text, MAX_DEPTH):
        raise StackFileError(
            f"{key}: the value is nested deeper than {MAX_DEPTH} levels of lists and maps: {cut(text)}"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
    except (ValueError, RecursionError) as exc:  # a number over Python's digit limit, say
        raise StackFileError(
            f"{key}: not a value the program can read ({clip(str(exc))}): {cut(text)}"
        ) from None
