"""What checkov's reports mean for the scan: each failed check, the accepted failure (skip) it matches,
and the counts per stack and framework.

The skips are `tools/checkov_skips.yaml` (`load_skips`; `skips_table` prints them for
docs/security.md). `collect` reads checkov's JSON reports into a `ScanResult`, matching each failure
to the first skip that covers it; `summary` and `summary_json` count them. Standard library and PyYAML
only.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SKIPS_FILE = Path(__file__).resolve().parent / "checkov_skips.yaml"
FRAMEWORKS = ("kubernetes", "terraform_plan")


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
# Findings.


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
