"""README facts that are generated: they must not drift from their source."""

from __future__ import annotations

import re
from pathlib import Path

from tools.checkov_scan import load_skips, skips_table

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_lists_exactly_the_accepted_checkov_failures() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- checkov-skips:start -->\n(.*?)\n<!-- checkov-skips:end -->", readme, re.S)
    assert match, "README lost its checkov-skips markers"
    expected = skips_table(load_skips(ROOT / "tools" / "checkov_skips.yaml")).strip()
    assert match.group(1).strip() == expected, "run: .venv/bin/python tools/checkov_scan.py --list-skips"


def test_readme_tool_commands_use_the_venv() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    bare = re.findall(r"(?<![/\w])python3? tools/\S+", readme)
    assert bare == [], f"README commands must run inside .venv: {bare}"
