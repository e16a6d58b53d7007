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
objects. This module imports nothing outside the standard library and PyYAML.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
RENDER_DIR = ROOT / "build" / "render"
SCAN_DIR = ROOT / "build" / "checkov"
SKIPS_FILE = ROOT / "tools" / "checkov_skips.yaml"
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
FRAMEWORKS = ("kubernetes", "terraform_plan")

# The offline render's placeholders (tools/offline.py): a value computed by GCP, a secret.
UNKNOWN = "(known after apply)"

# Pulumi type tokens and the Terraform resource types they bridge. Others follow the usual rule
# (gcp:<module>/<x>:<Type> -> google_<module>_<type>), which holds for most of pulumi-gcp.
TERRAFORM_TYPES = {
    "gcp:container/cluster:Cluster": "google_container_cluster",
    "gcp:container/nodePool:NodePool": "google_container_node_pool",
    "gcp:compute/network:Network": "google_compute_network",
    "gcp:compute/subnetwork:Subnetwork": "google_compute_subnetwork",
    "gcp:compute/router:Router": "google_compute_router",
    "gcp:compute/routerNat:RouterNat": "google_compute_router_nat",
    "gcp:compute/firewall:Firewall": "google_compute_firewall",
    "gcp:serviceaccount/account:Account": "google_service_account",
    "gcp:projects/iAMMember:IAMMember": "google_project_iam_member",
    "gcp:monitoring/dashboard:Dashboard": "google_monitoring_dashboard",
    "gcp:monitoring/alertPolicy:AlertPolicy": "google_monitoring_alert_policy",
}
# Pulumi names plural the Terraform blocks that may repeat; the Terraform name is singular.
FIELD_NAMES = {
    "guestAccelerators": "guest_accelerator",
    "secondaryIpRanges": "secondary_ip_range",
    "taints": "taint",
    "subnetworks": "subnetwork",
    "sourceIpRangesToNats": "source_ip_ranges_to_nat",
}
# Inputs that are Terraform maps, not blocks: their keys stay as written (label keys, metadata).
MAP_FIELDS = {"labels", "resourceLabels", "userLabels", "metadata", "resourceManagerTags", "tags"}


# --------------------------------------------------------------------------------------------------
# The render -> Terraform plan JSON conversion.


def terraform_type(pulumi_type: str) -> str:
    if pulumi_type in TERRAFORM_TYPES:
        return TERRAFORM_TYPES[pulumi_type]
    match = re.fullmatch(r"gcp:([A-Za-z0-9]+)/[A-Za-z0-9]+:([A-Za-z0-9]+)", pulumi_type)
    if not match:
        raise ValueError(f"{pulumi_type!r} is not a pulumi-gcp resource type")
    return f"google_{match.group(1).lower()}_{snake_case(match.group(2))}"


def snake_case(name: str) -> str:
    """Pulumi's camelCase input names back to Terraform's: ``masterIpv4CidrBlock`` ->
    ``master_ipv4_cidr_block``, ``enableK8sTokensViaDns`` -> ``enable_k8s_tokens_via_dns``."""
    if name in FIELD_NAMES:
        return FIELD_NAMES[name]
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def resource_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _convert(value: Any) -> tuple[Any, Any]:
    """(value for `after`, mark for `after_unknown`) of one input. A block (a Pulumi object that is
    not a map) becomes a list of one; a value known only after apply is left out, marked True."""
    if value == UNKNOWN:
        return None, True
    if isinstance(value, Mapping):
        block, unknown = _convert_block(value)
        return [block], [unknown] if unknown else None
    if isinstance(value, list):
        items: list[Any] = []
        marks: list[Any] = []
        for item in value:
            if isinstance(item, Mapping):
                block, unknown = _convert_block(item)
                items.append(block)
                marks.append(unknown)
            else:
                items.append(None if item == UNKNOWN else item)
                marks.append(item == UNKNOWN)
        return items, marks if any(marks) else None
    return value, None


def _convert_block(inputs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    after: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for key, value in inputs.items():
        name = snake_case(key)
        if key in MAP_FIELDS and isinstance(value, Mapping):
            known = {k: v for k, v in value.items() if v != UNKNOWN}
            after[name] = known
            if len(known) != len(value):
                unknown[name] = {k: True for k, v in value.items() if v == UNKNOWN}
            continue
        converted, mark = _convert(value)
        if mark is True:
            unknown[name] = True
            continue
        after[name] = converted
        if mark:
            unknown[name] = mark
    return after, unknown


def to_terraform_plan(render: Mapping[str, Any]) -> dict[str, Any]:
    """A minimal Terraform plan JSON (format 1.2) creating the render's GCP resources."""
    planned: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    seen: set[str] = set()
    for resource in render.get("resources", []):
        if resource.get("component") or not str(resource.get("type", "")).startswith("gcp:"):
            continue
        tf_type = terraform_type(resource["type"])
        name = resource_name(resource["name"])
        address = f"{tf_type}.{name}"
        if address in seen:
            raise ValueError(f"two resources convert to {address}")
        seen.add(address)
        after, unknown = _convert_block(resource.get("inputs", {}))
        common = {
            "address": address,
            "mode": "managed",
            "type": tf_type,
            "name": name,
            "provider_name": "registry.terraform.io/hashicorp/google",
        }
        planned.append({**common, "schema_version": 0, "values": after, "sensitive_values": {}})
        changes.append(
            {
                **common,
                "change": {
                    "actions": ["create"],
                    "before": None,
                    "after": after,
                    "after_unknown": unknown,
                    "before_sensitive": False,
                    "after_sensitive": {},
                },
            }
        )
    return {
        "format_version": "1.2",
        # Not produced by Terraform: converted from the Pulumi render by tools/checkov_scan.py.
        "terraform_version": "0.0.0-pulumi-render",
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": changes,
        "configuration": {"root_module": {}},
    }


# --------------------------------------------------------------------------------------------------
# Skips.


@dataclass(frozen=True)
class Skip:
    check: str
    resources: tuple[str, ...]
    reason: str
    stacks: tuple[str, ...] = ()
    # Only where the resource's converted values (tfplan.json) hold these: `enable_autopilot: true`,
    # `binary_authorization.0.evaluation_mode: DISABLED` (dotted paths, list indexes as numbers).
    when: tuple[tuple[str, Any], ...] = ()
    title: str = ""

    def matches(self, finding: Finding, values: Mapping[str, Any] | None) -> bool:
        return (
            finding.check == self.check
            and (not self.stacks or finding.stack in self.stacks)
            and any(fnmatch.fnmatchcase(finding.resource, pattern) for pattern in self.resources)
            and all(_lookup(values, path) == expected for path, expected in self.when)
        )


def _lookup(values: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(values, list) and part.isdigit() and int(part) < len(values):
            values = values[int(part)]
        elif isinstance(values, Mapping) and part in values:
            values = values[part]
        else:
            return None
    return values


class SkipsError(ValueError):
    pass


def load_skips(path: Path = SKIPS_FILE) -> list[Skip]:
    """The accepted failures. Every entry names its check, the resources (checkov resource names,
    `*` patterns allowed) and its reason; `stacks` (default: all), `when` and `title` are optional."""
    document = yaml.safe_load(path.read_text()) or {}
    entries = document.get("skips") or []
    if not isinstance(entries, list):
        raise SkipsError(f"{path}: `skips` must be a list")
    skips: list[Skip] = []
    problems: list[str] = []
    allowed = {"check", "resources", "reason", "stacks", "when", "title"}
    for i, entry in enumerate(entries):
        where = f"{path.name}: skips[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: not a mapping")
            continue
        unknown = set(entry) - allowed
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        check = entry.get("check")
        if not isinstance(check, str) or not re.fullmatch(r"CKV2?_[A-Z0-9]+_\d+", check):
            problems.append(f"{where}.check: {check!r} is not a checkov check id (CKV_GCP_20, CKV_K8S_40)")
        resources = entry.get("resources")
        if (
            not resources
            or not isinstance(resources, list)
            or not all(isinstance(r, str) and r for r in resources)
        ):
            problems.append(f"{where}.resources: required, a list of resource names")
            resources = []
        reason = entry.get("reason")
        if not isinstance(reason, str) or len(reason.strip()) < 20:
            problems.append(f"{where}.reason: required, a sentence saying why the failure is accepted")
        stacks = entry.get("stacks") or []
        if not isinstance(stacks, list) or not all(isinstance(s, str) for s in stacks):
            problems.append(f"{where}.stacks: a list of stack names")
            stacks = []
        when = entry.get("when") or {}
        if not isinstance(when, dict):
            problems.append(f"{where}.when: a mapping of attribute path to value")
            when = {}
        skips.append(
            Skip(
                check=str(check),
                resources=tuple(resources),
                reason=" ".join(str(reason).split()),
                stacks=tuple(stacks),
                when=tuple(sorted(when.items())),
                title=str(entry.get("title", "")),
            )
        )
    if problems:
        raise SkipsError("\n".join(problems))
    return skips


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def skips_table(skips: Sequence[Skip]) -> str:
    """The skips as a Markdown table (docs/security.md, between its checkov-skips markers)."""
    lines = ["| check | what | resources (stacks) | why accepted |", "| --- | --- | --- | --- |"]
    for s in skips:
        where = ", ".join(f"`{r}`" for r in s.resources)
        if s.when:
            where += " where " + ", ".join(f"`{k}` is `{_text(v)}`" for k, v in s.when)
        if s.stacks:
            where += f" ({', '.join(s.stacks)})"
        lines.append(f"| {s.check} | {s.title} | {where} | {s.reason.replace('|', '/')} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# The scan.


@dataclass
class Finding:
    stack: str
    framework: str
    check: str
    name: str
    resource: str
    file: str
    skip: Skip | None = None


@dataclass
class ScanResult:
    findings: list[Finding] = field(default_factory=list)
    passed: dict[tuple[str, str], int] = field(default_factory=dict)
    parsing_errors: list[str] = field(default_factory=list)
    scanned: dict[tuple[str, str], int] = field(default_factory=dict)

    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.skip is None]


def _stack_of(path: str, stacks: Iterable[str], scan_dir: Path) -> tuple[str, str] | None:
    """(stack, framework) of a file checkov reports: <scan dir>/<stack>/tfplan.json or manifests/."""
    try:
        parts = Path(path).resolve().relative_to(scan_dir.resolve()).parts
    except ValueError:
        return None
    if len(parts) < 2 or parts[0] not in stacks:
        return None
    return parts[0], "terraform_plan" if parts[1] == "tfplan.json" else "kubernetes"


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


def collect(
    reports: Sequence[Mapping[str, Any]],
    stacks: Sequence[str],
    skips: Sequence[Skip],
    scan_dir: Path,
) -> ScanResult:
    result = ScanResult()
    planned: dict[str, dict[str, Any]] = {}
    for stack in stacks:
        plan = scan_dir / stack / "tfplan.json"
        if plan.is_file():
            resources = json.loads(plan.read_text())["planned_values"]["root_module"]["resources"]
            planned[stack] = {r["address"]: r["values"] for r in resources}
    for report in reports:
        results = report.get("results", {})
        for kind in ("passed_checks", "failed_checks"):
            for item in results.get(kind, []):
                path = item.get("file_abs_path") or item.get("file_path", "")
                owner = _stack_of(path, stacks, scan_dir)
                if owner is None:
                    raise RuntimeError(f"checkov reported a file outside {scan_dir}: {path}")
                stack, framework = owner
                result.scanned[(stack, framework)] = result.scanned.get((stack, framework), 0) + 1
                if kind == "passed_checks":
                    result.passed[(stack, framework)] = result.passed.get((stack, framework), 0) + 1
                    continue
                finding = Finding(
                    stack=stack,
                    framework=framework,
                    check=str(item.get("check_id", "")),
                    name=str(item.get("check_name", "")),
                    resource=short_resource(str(item.get("resource", ""))),
                    file=str(item.get("file_path", "")),
                )
                values = planned.get(stack, {}).get(finding.resource)
                finding.skip = next((s for s in skips if s.matches(finding, values)), None)
                result.findings.append(finding)
        result.parsing_errors += [str(e) for e in results.get("parsing_errors", [])]
    return result


def short_resource(resource: str) -> str:
    """checkov names the Pods of its graph checks (CKV2_K8S_*) by namespace, name and every label:
    keep `Pod.<namespace>.<name>`."""
    match = re.match(r"(Pod\.[^.]+\.[^.]+)\.[^/]*/", resource)
    return match.group(1) if match else resource


def unused_skips(skips: Sequence[Skip], result: ScanResult) -> list[Skip]:
    used = {id(f.skip) for f in result.findings if f.skip is not None}
    return [s for s in skips if id(s) not in used]


def summary(result: ScanResult, stacks: Sequence[str]) -> str:
    lines = ["stack     framework       passed  failed  skipped  unskipped"]
    for stack in stacks:
        for framework in FRAMEWORKS:
            failed = [f for f in result.findings if f.stack == stack and f.framework == framework]
            skipped = sum(1 for f in failed if f.skip)
            lines.append(
                f"{stack:<9} {framework:<15} {result.passed.get((stack, framework), 0):>6}  "
                f"{len(failed):>6}  {skipped:>7}  {len(failed) - skipped:>9}"
            )
    return "\n".join(lines)


def summary_json(result: ScanResult, stacks: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stack in stacks:
        for framework in FRAMEWORKS:
            failed = [f for f in result.findings if f.stack == stack and f.framework == framework]
            out.setdefault(stack, {})[framework] = {
                "passed": result.passed.get((stack, framework), 0),
                "failed": len(failed),
                "skipped": sum(1 for f in failed if f.skip),
                "unskipped": [
                    {"check": f.check, "resource": f.resource, "name": f.name} for f in failed if not f.skip
                ],
            }
    return out


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
