#!/usr/bin/env python3
"""Golden plans: the offline render of every stack, committed under tests/golden/<stack>.json.

    python tools/golden.py --check     # exit 1 and print the difference when a render drifted
    python tools/golden.py --update    # regenerate them all (then review `git diff tests/golden`)

A pull request that changes what a stack would create changes its golden file, so the reviewer sees
the exact resource inputs it touches (and `replaceOnChange` says which of them recreate a pool).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from tools import plan
    from tools.offline import ROOT, run_stack, stacks
except ModuleNotFoundError as exc:  # not the project's virtualenv: say how to get it, no traceback
    from tools.venv_guard import exit_without_venv

    exit_without_venv(exc, __name__, "tools/golden.py")

GOLDEN_DIR = ROOT / "tests" / "golden"
UPDATE_COMMAND = ".venv/bin/python tools/golden.py --update"


def golden_path(stack: str) -> Path:
    return GOLDEN_DIR / f"{stack}.json"


def current(stack: str) -> dict:
    result = run_stack(stack)
    if result.error is not None:
        raise result.error
    return plan.to_document(result)


def drift(stack: str) -> str | None:
    """None when the stack's render matches its golden file, else a readable difference."""
    path = golden_path(stack)
    document = current(stack)
    if not path.exists():
        return f"{path.relative_to(ROOT)} is missing; create it with `{UPDATE_COMMAND}`"
    golden = json.loads(path.read_text(encoding="utf-8"))
    if golden == document:
        return None
    summary = plan.format_diff(plan.diff(golden, document))
    lines = list(
        difflib.unified_diff(
            plan.dumps(golden).splitlines(),
            plan.dumps(document).splitlines(),
            fromfile=f"golden/{stack}.json",
            tofile=f"render of {stack}",
            lineterm="",
            n=2,
        )
    )
    shown = "\n".join(lines[:200]) + (f"\n... {len(lines) - 200} more diff lines" if len(lines) > 200 else "")
    return (
        f"stack {stack} drifted from {path.relative_to(ROOT)}:\n{summary}\n\n{shown}\n\n"
        f"If the change is intended, regenerate with `{UPDATE_COMMAND}` and commit the diff."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare renders with the golden files")
    mode.add_argument("--update", action="store_true", help="rewrite the golden files")
    args = parser.parse_args(argv)
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    names = stacks()
    if args.update:
        for stack in names:
            golden_path(stack).write_text(plan.dumps(current(stack)), encoding="utf-8")
            print(f"wrote {golden_path(stack).relative_to(ROOT)}")
        for stale in sorted(set(p.stem for p in GOLDEN_DIR.glob("*.json")) - set(names)):
            golden_path(stale).unlink()
            print(f"removed {golden_path(stale).relative_to(ROOT)} (no Pulumi.{stale}.yaml)")
        return 0
    status = 0
    for stack in names:
        difference = drift(stack)
        if difference:
            print(difference)
            status = 1
        else:
            print(f"golden {stack}: unchanged")
    return status


if __name__ == "__main__":
    sys.exit(main())
