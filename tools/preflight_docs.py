#!/usr/bin/env python3
"""The README's and docs/ci.md's API and role lists, generated from the preflight of every example
stack (gke_gpu/project: the same tables the render and tools/preflight.py use).

    python tools/preflight_docs.py --update   # rewrite the generated blocks
    python tools/preflight_docs.py            # exit 1 when a block differs from what it would write

Each block sits between `<!-- preflight:NAME -->` and `<!-- /preflight:NAME -->`; the text around it
is the docs' own. tests/test_preflight_docs.py fails when a block drifts from the tables.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gke_gpu.project.roles import bucket_grantable
from tools.offline import ROOT, run_stack, stacks

DOCS = (ROOT / "README.md", ROOT / "docs" / "ci.md")
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"


def example_previews() -> dict[str, dict[str, Any]]:
    """Each example stack's render document (resources and preflight), by stack name."""
    from tools.plan import to_document

    documents = {}
    for stack in stacks():
        result = run_stack(stack)
        if result.error is not None:
            raise result.error
        documents[stack] = to_document(result)
    return documents


def _union(documents: dict[str, dict[str, Any]], mode: str) -> dict[str, list[str]]:
    """role -> the stacks whose preflight asks for it (project roles, then bucket roles)."""
    found: dict[str, list[str]] = {}
    for stack, document in documents.items():
        for project in document["preflight"]["projects"]:
            grants = [*project["roles"][mode], *(g for b in project["buckets"] for g in b["roles"][mode])]
            for grant in grants:
                found.setdefault(grant["role"], [])
                if stack not in found[grant["role"]]:
                    found[grant["role"]].append(stack)
    return found


def _apis(documents: dict[str, dict[str, Any]]) -> dict[str, tuple[str, list[str], list[str]]]:
    """api -> (title, what needs it, stacks)."""
    found: dict[str, tuple[str, list[str], list[str]]] = {}
    for stack, document in documents.items():
        for project in document["preflight"]["projects"]:
            for api in project["apis"]:
                _, why, which = found.setdefault(api["api"], (api["title"], [], []))
                why += [w for w in api["for"] if w not in why]
                if stack not in which:
                    which.append(stack)
    return dict(sorted(found.items()))


def _bucket_roles(documents: dict[str, dict[str, Any]], mode: str) -> set[str]:
    return {
        g["role"]
        for d in documents.values()
        for p in d["preflight"]["projects"]
        for b in p["buckets"]
        for g in b["roles"][mode]
    }


def _stacks(names: list[str], every: int) -> str:
    return "every GCP stack" if len(names) == every else ", ".join(f"`{n}`" for n in sorted(names))


def _gcp_stacks(documents: dict[str, dict[str, Any]]) -> int:
    return sum(1 for d in documents.values() if d["preflight"]["projects"])


def readme_apis(documents: dict[str, dict[str, Any]]) -> str:
    apis = _apis(documents)
    every = _gcp_stacks(documents)
    lines = [
        "| API | Needed for | Stacks |",
        "| --- | --- | --- |",
        *(
            f"| `{api}` ({title}) | {'; '.join(why)} | {_stacks(which, every)} |"
            for api, (title, why, which) in apis.items()
        ),
        "",
        "```sh",
        "gcloud services enable \\",
        *(f"  {api} \\" for api in apis),
        "  --project <your-project>",
        "```",
    ]
    return "\n".join(lines)


def _role_rows(documents: dict[str, dict[str, Any]], mode: str) -> list[str]:
    roles = _union(documents, mode)
    every = _gcp_stacks(documents)
    titles = {
        g["role"]: g["title"]
        for d in documents.values()
        for p in d["preflight"]["projects"]
        for g in [*p["roles"][mode], *(g for b in p["buckets"] for g in b["roles"][mode])]
    }
    buckets = _bucket_roles(documents, mode)
    rows = []
    for role, which in roles.items():
        scope = ""
        if role in buckets:
            scope = " (on the model bucket)" if bucket_grantable(role) else " (for the model bucket's IAM)"
        rows.append(f"| `{role}`{scope} | {titles[role]} | {_stacks(which, every)} |")
    return rows


def readme_roles(documents: dict[str, dict[str, Any]]) -> str:
    lines = [
        "`pulumi up` (the deployer):",
        "",
        "| Role | Title | Stacks |",
        "| --- | --- | --- |",
        *_role_rows(documents, "up"),
        "",
        "`pulumi preview` (read-only):",
        "",
        "| Role | Title | Stacks |",
        "| --- | --- | --- |",
        *_role_rows(documents, "preview"),
    ]
    return "\n".join(lines)


def ci_apis(documents: dict[str, dict[str, Any]]) -> str:
    apis = list(_apis(documents))
    lines = [
        "```sh",
        'for p in "$CI_PROJECT" $STACK_PROJECTS; do',
        '  gcloud services enable iamcredentials.googleapis.com sts.googleapis.com --project="$p"',
        "done",
        "for p in $STACK_PROJECTS; do",
        "  gcloud services enable \\",
        *(f"    {api} \\" for api in apis),
        '    --project="$p"',
        "done",
        "```",
    ]
    return "\n".join(lines)


def ci_roles(documents: dict[str, dict[str, Any]]) -> str:
    project_up = [r for r in _union(documents, "up") if not bucket_grantable(r)]
    project_preview = [r for r in _union(documents, "preview") if not bucket_grantable(r)]
    granted = sorted(
        {
            r["inputs"]["role"]
            for d in documents.values()
            for r in d["resources"]
            if r["type"] == PROJECT_IAM and isinstance(r["inputs"].get("role"), str)
        }
    )
    lines = [
        "| Role | Title | Stacks |",
        "| --- | --- | --- |",
        "| **`pulumi up`, the deployer** | | |",
        *_role_rows(documents, "up"),
        "| **`pulumi preview`, the preview identity (read-only)** | | |",
        *_role_rows(documents, "preview"),
        "",
        "```sh",
        "for p in $STACK_PROJECTS; do",
        "  for role in " + " ".join(project_up) + "; do",
        '    gcloud projects add-iam-policy-binding "$p" --member="serviceAccount:$DEPLOY_SA" --role="$role"',
        "  done",
        "  for role in " + " ".join(project_preview) + "; do",
        '    gcloud projects add-iam-policy-binding "$p" --member="serviceAccount:$PREVIEW_SA" '
        '--role="$role"',
        "  done",
        "done",
        "# A serving stack's model bucket (gke-gpu:serving[].weights): the program grants its reader on it.",
        "MODEL_BUCKET=<your model bucket>",
        *(
            f'gcloud storage buckets add-iam-policy-binding "gs://$MODEL_BUCKET" '
            f'--member="serviceAccount:${sa}" --role={role}'
            for mode, sa in (("up", "DEPLOY_SA"), ("preview", "PREVIEW_SA"))
            for role in sorted(_bucket_roles(documents, mode))
            if bucket_grantable(role)
        ),
        "```",
        "",
        "The project roles the program itself grants (its service accounts'), for the optional IAM "
        "condition on `roles/resourcemanager.projectIamAdmin` below: "
        + ", ".join(f"`{r}`" for r in granted)
        + ".",
    ]
    return "\n".join(lines)


BLOCKS: dict[Path, dict[str, Callable[[dict[str, dict[str, Any]]], str]]] = {
    ROOT / "README.md": {"apis": readme_apis, "roles": readme_roles},
    ROOT / "docs" / "ci.md": {"apis": ci_apis, "roles": ci_roles},
}


def rewrite(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- preflight:{name} -->\n)(?:.*?\n)?(<!-- /preflight:{name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"no <!-- preflight:{name} --> block")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def generated(documents: dict[str, dict[str, Any]]) -> dict[Path, str]:
    """Each document's text with its blocks as the tables say."""
    out = {}
    for path, blocks in BLOCKS.items():
        text = path.read_text(encoding="utf-8")
        for name, build in blocks.items():
            text = rewrite(text, name, build(documents))
        out[path] = text
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the docs' API and role lists from the tables.")
    parser.add_argument("--update", action="store_true", help="rewrite the blocks")
    args = parser.parse_args(argv)
    drift = []
    for path, text in generated(example_previews()).items():
        if path.read_text(encoding="utf-8") == text:
            continue
        if args.update:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
        else:
            drift.append(str(path.relative_to(ROOT)))
    if drift:
        print(f"out of date: {', '.join(drift)}; run `.venv/bin/python tools/preflight_docs.py --update`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
