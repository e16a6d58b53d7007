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
_SHAPES: tuple[tuple[str, str], ...] = (
    (
        "PEM private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----)?",
    ),
    ("GitHub token", r"github_pat_[A-Za-z0-9_]{20,}|gh[pousr]_[A-Za-z0-9]{30,}"),
    ("Hugging Face token", r"hf_[A-Za-z0-9]{30,}"),
    ("Google API key", r"AIza[0-9A-Za-z_-]{35}"),
    ("Google OAuth token", r"ya29\.[0-9A-Za-z_.-]{20,}"),
    ("JSON Web Token", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    ("bearer token", r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}"),
)
_ANY = re.compile("|".join(f"(?P<s{i}>{pattern})" for i, (_, pattern) in enumerate(_SHAPES)), re.DOTALL)
_KINDS = {f"s{i}": kind for i, (kind, _) in enumerate(_SHAPES)}

_Text = TypeVar("_Text", bound=str)


def credential_kind(text: str) -> str | None:
    """The kind of the first credential-shaped part of `text` (`Hugging Face token`), or None."""
    match = _ANY.search(text)
    return _KINDS[match.lastgroup or ""] if match else None


def hidden(kind: str, length: int) -> str:
    """What a message shows instead of a credential."""
    return f"[{kind}, {length} characters, not shown]"


def redact(text: _Text) -> _Text | str:
    """`text` with each credential-shaped part replaced by its kind and length; `text` itself (its own
    type kept, a Problem stays a Problem) when it holds none."""
    if not _ANY.search(text):
        return text
    return _ANY.sub(lambda m: hidden(_KINDS[m.lastgroup or ""], len(m.group())), text)


def credentials_in(value: Any, loc: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str, int]]:
    """(location, kind, length) of every string in a nested value (maps and lists, as a stack file's
    value decodes) that holds a credential-shaped part; a map's key is checked as well as its value."""
    if isinstance(value, str):
        match = _ANY.search(value)
        if match:
            yield loc, _KINDS[match.lastgroup or ""], len(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (match := _ANY.search(key)):
                yield (*loc, redact(key)), _KINDS[match.lastgroup or ""], len(key)
            yield from credentials_in(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from credentials_in(item, (*loc, index))
