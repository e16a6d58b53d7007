"""What in a text looks like a credential, and that text with each one replaced by its kind and length.

Every message, note and render line that can repeat a user's value goes through `redact` (core/common.py
`cut` and `Problem`, the stack file's errors, InvalidArgsError), so a token pasted into the wrong key is
never printed into a terminal or a CI log. The shapes are the token formats their issuers publish; a
value that only resembles one (a 37-character label starting `hf_`) is hidden too: a false alarm costs a
less helpful message, a miss leaks a credential."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypeVar


# (kind, pattern), most specific first: a match is replaced whole, so a later shape never sees it.
# Sources: Hugging Face "User access tokens" (hf_ prefix); GitHub "About authentication to GitHub"
# (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_ prefixes); Google Cloud "API keys" (AIza prefix, 39
# characters); Google OAuth 2.0 access tokens (ya29. prefix); RFC 6750 (Bearer); RFC 7468 (PEM
# labels); RFC 7519 (a JWT is three base64url parts, its header JSON so `eyJ`).
def _word(prefix: str) -> str:
    """`prefix` where it starts a word: the literal first (the engine scans for it fast), then a look
    back that the character before it is not a word's."""
    return f"{re.escape(prefix)}(?<![A-Za-z0-9_]{re.escape(prefix)})"


# (kind, marker, pattern): a pattern runs only on a text holding its marker (a substring test is far
# cheaper than a scan, and most texts hold none); possessive repeats keep each scan linear.
_SHAPES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (kind, marker, re.compile(pattern))
    for kind, marker, pattern in (
        (
            "PEM private key",
            "PRIVATE KEY-----",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[A-Za-z0-9+/=\s\\]*+"  # \\: a repr's "\\n"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----)?",
        ),
        ("GitHub token", "github_pat_", _word("github_pat_") + r"[A-Za-z0-9_]{20,}+"),
        ("GitHub token", "_", r"gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{30,}+"),
        ("Hugging Face token", "hf_", _word("hf_") + r"[A-Za-z0-9]{30,}+"),
        ("Google API key", "AIza", _word("AIza") + r"[0-9A-Za-z_-]{35}"),
        ("Google OAuth token", "ya29.", _word("ya29.") + r"[0-9A-Za-z_.-]{20,}+"),
        ("JSON Web Token", "eyJ", _word("eyJ") + r"[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+"),
        ("bearer token", "", r"(?i:bearer)\s++[A-Za-z0-9._~+/=-]{16,}+"),
    )
)


def _matches(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every credential-shaped part, in order, none overlapping."""
    found: list[tuple[int, int, str]] = []
    lowered: str | None = None
    for kind, marker, pattern in _SHAPES:
        if marker:
            if marker not in text:
                continue
        else:
            lowered = text.lower() if lowered is None else lowered
            if "bearer" not in lowered:
                continue
        found += [(m.start(), m.end(), kind) for m in pattern.finditer(text)]
    found.sort()
    kept: list[tuple[int, int, str]] = []
    for start, end, kind in found:
        if not kept or start >= kept[-1][1]:
            kept.append((start, end, kind))
    return kept


_Text = TypeVar("_Text", bound=str)


def credential_kind(text: str) -> str | None:
    """The kind of the first credential-shaped part of `text` (`Hugging Face token`), or None."""
    found = _matches(text)
    return found[0][2] if found else None


def hidden(kind: str, length: int) -> str:
    """What a message shows instead of a credential."""
    return f"[{kind}, {length} characters, not shown]"


def redact(text: _Text) -> _Text | str:
    """`text` with each credential-shaped part replaced by its kind and length; `text` itself (its own
    type kept, a Problem stays a Problem) when it holds none."""
    found = _matches(text)
    if not found:
        return text
    parts, at = [], 0
    for start, end, kind in found:
        parts += [text[at:start], hidden(kind, end - start)]
        at = end
    return "".join([*parts, text[at:]])


def credentials_in(
    value: Any, loc: tuple[Any, ...] = (), *, skip: tuple[tuple[Any, ...], ...] = ()
) -> Iterator[tuple[tuple[Any, ...], str, int]]:
    """(location, kind, length) of every string in a nested value (maps and lists, as a stack file's
    value decodes) that holds a credential-shaped part; a map's key is checked as well as its value.
    The locations in `skip` are not read."""
    if loc in skip:
        return
    if isinstance(value, str):
        kind = credential_kind(value)
        if kind:
            yield loc, kind, len(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (kind := credential_kind(key)):
                yield (*loc, redact(key)), kind, len(key)
            yield from credentials_in(item, (*loc, key), skip=skip)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from credentials_in(item, (*loc, index), skip=skip)
