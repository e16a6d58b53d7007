"""README and docs/ facts that are generated or checked: they must not drift from their source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.checkov_scan import load_skips, skips_table

ROOT = Path(__file__).resolve().parent.parent
SECURITY = ROOT / "docs" / "security.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_security_doc_lists_exactly_the_accepted_checkov_failures() -> None:
    security = SECURITY.read_text(encoding="utf-8")
    match = re.search(r"<!-- checkov-skips:start -->\n(.*?)\n<!-- checkov-skips:end -->", security, re.S)
    assert match, "docs/security.md lost its checkov-skips markers"
    expected = skips_table(load_skips(ROOT / "tools" / "checkov_skips.yaml")).strip()
    assert match.group(1).strip() == expected, (
        "docs/security.md's table is out of date: paste the output of "
        ".venv/bin/python tools/checkov_scan.py --list-skips between its markers"
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_tool_commands_use_the_venv(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    bare = re.findall(r"(?<![/\w])python3? tools/\S+", text)
    assert bare == [], f"{doc.relative_to(ROOT)}: commands must run inside .venv: {bare}"
