"""Which of Cloud Storage's bucket naming rules a bucket name breaks, in the user's words (Cloud
Storage, "Bucket names": cloud.google.com/storage/docs/buckets#naming; docs/serving-research.md,
"Objects (serving-objects)")."""

from __future__ import annotations

import ipaddress
import re

from ..core.common import cut

_ALLOWED = re.compile(r"[a-z0-9._-]")
MIN_LENGTH, MAX_LENGTH, MAX_DOTTED_LENGTH = 3, 63, 222


def bucket_name_problem(name: str) -> str | None:
    """The first rule `name` breaks, or None where it is a valid bucket name."""
    bad = sorted({c for c in name if not _ALLOWED.fullmatch(c)})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:5])
        return f"has {shown}: a bucket name has only lowercase letters, digits, '-', '_' and '.'"
    if not name:
        return "is empty: gs://<bucket>/<path>"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must start and end with a letter or a digit"
    if "." in name:
        if len(name) > MAX_DOTTED_LENGTH:
            return f"is {len(name)} characters: a name with dots has at most {MAX_DOTTED_LENGTH}"
        if ".." in name:
            return "has two dots in a row: each dot-separated part has 1 to 63 characters"
        long_part = next((p for p in name.split(".") if len(p) > MAX_LENGTH), None)
        if long_part is not None:
            return (
                f"has a dot-separated part {cut(long_part)} of {len(long_part)} characters: each has "
                f"at most {MAX_LENGTH}"
            )
    elif not MIN_LENGTH <= len(name) <= MAX_LENGTH:
        return f"is {len(name)} characters: a bucket name has {MIN_LENGTH} to {MAX_LENGTH}"
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        return "is an IP address in dotted-decimal notation, which a bucket name may not be"
    if name.startswith("goog"):
        return "starts with 'goog', which Cloud Storage reserves"
    if "google" in name:
        return "contains 'google', which Cloud Storage reserves"
    return None
