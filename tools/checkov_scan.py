#!/usr/bin/env python3
"""checkov over what every stack declares: its Kubernetes manifests and its GCP resources.

    python tools/checkov_scan.py                      # every stack rendered under build/render
    python tools/checkov_scan.py --stack prod         # one stack (repeatable)
    python tools/checkov_scan.py --list-skips         # the accepted failures, as a Markdown table
    python tools/checkov_scan.py --plan-only          # only write the Terraform plan JSON files

Input: the offline render (`tools/render.py --stack S --out build/render/S`): `render.json` and
`manifests/*.yaml`. checkov reads the manifests as they are (framework `kubernetes`). It cannot read
Pulumi, so the render's `gcp:*` resources are converted into a minimal Terraform plan JSON
(`build/checkov/<stack>/tfplan.json`, framework `terraform_plan`): one `google_*` resource per
Pulumi resource, its inputs in snake_case with nested blocks as lists, values known only after
apply left out (listed in `after_unknown`). Only what the program declares is scanned: provider
and GKE defaults are not filled in, so a check that expects a default to be written out fails.

checkov runs from its own virtual environment (`.venv-checkov`, from `requirements-checkov.txt`:
checkov needs packaging<24, the program pins 26), once for all stacks. Every failed check must be
listed in `tools/checkov_skips.yaml` (check, resources, reason); any other failure, or a file
checkov could not parse, fails the scan (exit 1). A skip that matched nothing is reported, so it
can go. Exit 2: no render, no checkov, or an invalid skips file.

Resource names in the results: `<terraform type>.<Pulumi resource name>` for GCP resources (any
character outside [A-Za-z0-9_-] becomes `_`), checkov's `<Kind>.<namespace>.<name>` for Kubernetes
objects. This module and its two parts (`checkov_tfplan.py`, the conversion; `checkov_findings.py`, the
skips and results) import nothing outside the standard library and PyYAML.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.checkov_findings import (
    FRAMEWORKS,
    SKIPS_FILE,
    SkipsError,
    collect,
    load_skips,
    skips_table,
    summary,
    summary_json,
    unused_skips,
)
from tools.checkov_findings import Finding as Finding
from tools.checkov_findings import Skip as Skip
from tools.checkov_tfplan import snake_case as snake_case
from tools.checkov_tfplan import terraform_type as terraform_type
from tools.checkov_tfplan import to_terraform_plan

ROOT = Path(__file__).resolve().parent.parent
RENDER_DIR = ROOT / "build" / "render"
SCAN_DIR = ROOT / "build" / "checkov"
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"


def prepare(stacks: Sequence[str], render_dir: Path, scan_dir: Path) -> dict[str, Path]:
    """<scan dir>/<stack>/tfplan.json from the render, and a copy of its manifests beside it: one
    directory for one checkov run (several --directory arguments make it print one report each)."""
    plans = {}
    # Earlier runs' stacks go too: checkov reads everything under the directory.
    for old in scan_dir.glob("*/tfplan.json"):
        shutil.rmtree(old.parent)
    for stack in stacks:
        render = json.loads((render_dir / stack / "render.json").read_text())
        out = scan_dir / stack
        (out / "manifests").mkdir(parents=True)
        (out / "tfplan.json").write_text(
            json.dumps(to_terraform_plan(render), indent=1, sort_keys=True) + "\n"
        )
        manifests = render_dir / stack / "manifests"
        for manifest in sorted(manifests.glob("*.yaml")) if manifests.is_dir() else []:
            shutil.copyfile(manifest, out / "manifests" / manifest.name)
        plans[stack] = out / "tfplan.json"
    return plans


def run_checkov(checkov: Path, scan_dir: Path) -> list[dict[str, Any]]:
    command = [
        str(checkov),
        "--directory",
        str(scan_dir),
        "--framework",
        *FRAMEWORKS,
        "--output",
        "json",
        "--skip-download",
        "--compact",
    ]
    # Offline: no PyPI version check, no Bridgecrew platform (no API key, --skip-download).
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "True", "BC_SKIP_MAPPING": "TRUE"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    # checkov exits 1 when a check fails: not an error here; no JSON on stdout is one.
    try:
        document = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(
            f"checkov failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        ) from None
    reports = document if isinstance(document, list) else [document]
    # With nothing to scan for a framework checkov prints a bare summary instead of a report.
    return [r for r in reports if isinstance(r, dict) and "check_type" in r]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="checkov over the rendered stacks (manifests and GCP resources)"
    )
    parser.add_argument("--stack", action="append", help="a stack rendered under --render-dir (default: all)")
    parser.add_argument("--render-dir", type=Path, default=RENDER_DIR, help="default: build/render")
    parser.add_argument(
        "--scan-dir", type=Path, default=SCAN_DIR, help="checkov's input, rewritten (default: build/checkov)"
    )
    parser.add_argument("--skips", type=Path, default=SKIPS_FILE, help="default: tools/checkov_skips.yaml")
    parser.add_argument("--checkov", type=Path, default=CHECKOV, help="default: .venv-checkov/bin/checkov")
    parser.add_argument("--list-skips", action="store_true", help="print the skips as a Markdown table")
    parser.add_argument("--plan-only", action="store_true", help="only write the Terraform plan JSON files")
    parser.add_argument("--no-skips", action="store_true", help="report every failure (a baseline)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the counts and failures here")
    args = parser.parse_args(argv)

    try:
        skips = [] if args.no_skips else load_skips(args.skips)
    except (OSError, SkipsError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.list_skips:
        print(skips_table(skips))
        return 0

    stacks = args.stack or sorted(p.parent.name for p in args.render_dir.glob("*/render.json"))
    missing = [s for s in stacks if not (args.render_dir / s / "render.json").is_file()]
    if not stacks or missing:
        print(
            f"error: no render for {', '.join(missing) or 'any stack'} under {args.render_dir}; run "
            "tools/render.py --stack STACK --out build/render/STACK first",
            file=sys.stderr,
        )
        return 2
    plans = prepare(stacks, args.render_dir, args.scan_dir)
    if args.plan_only:
        for stack, path in plans.items():
            print(f"{stack}: {path}")
        return 0
    if not args.checkov.exists():
        print(
            f"error: {args.checkov} not found; python3 -m venv .venv-checkov && "
            ".venv-checkov/bin/pip install -r requirements-checkov.txt",
            file=sys.stderr,
        )
        return 2

    started = time.monotonic()
    reports = run_checkov(args.checkov, args.scan_dir)
    result = collect(reports, stacks, skips, args.scan_dir)
    elapsed = time.monotonic() - started

    for f in sorted(result.findings, key=lambda f: (f.stack, f.framework, f.check, f.resource)):
        print(f"{'skip' if f.skip else 'FAIL'} {f.stack:<7} {f.check:<12} {f.resource}  ({f.name})")
    print()
    print(summary(result, stacks))
    print(f"checkov: {elapsed:.0f}s for {len(stacks)} stack(s)")
    if args.json:
        args.json.write_text(json.dumps(summary_json(result, stacks), indent=1) + "\n")
    for s in unused_skips(skips, result):
        print(f"note: the skip of {s.check} for {', '.join(s.resources)} matched nothing: remove it")
    problems = [f"checkov could not parse {e}" for e in result.parsing_errors]
    problems += [
        f"stack {stack}: checkov ran no check on its GCP resources (tfplan.json not read?)"
        for stack, plan in plans.items()
        if json.loads(plan.read_text())["resource_changes"]
        and not result.scanned.get((stack, "terraform_plan"))
    ]
    failures = result.failures()
    if failures:
        problems.append(
            f"{len(failures)} failed check(s) not in {args.skips.name}: fix them, or add a skip "
            "(check, resources, reason)"
        )
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
