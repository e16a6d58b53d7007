#!/usr/bin/env python3
"""The provider's replace-on-change fields, read from its source: every schema field marked
`ForceNew: true` in terraform-provider-google-beta's container resources (the provider pulumi-gcp
bridges; the installed pulumi_gcp SDK carries the field names but not this flag).

    python tools/provider_force_new.py PROVIDER_CHECKOUT [--commit SHA --date YYYY-MM-DD]

writes tests/schemas/provider_force_new.json: per Pulumi type token, the ForceNew paths in the
provider's snake_case (a nested block's fields under `block.field`). tests/test_replace_on_change.py
maps them onto the installed pulumi_gcp's input types and checks the render's `replaceOnChange`
lists (gke_gpu/gpu/node_pool.py REPLACE_ON_CHANGE, tools/plan.py) against them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "schemas" / "provider_force_new.json"
DIR = "google-beta/services/container"
# The schema functions a resource embeds by call (`"node_config": schemaNodeConfig(),`) and where.
EMBEDDED = {"schemaNodeConfig()": f"{DIR}/node_config.go"}
RESOURCES = {
    "gcp:container/nodePool:NodePool": f"{DIR}/resource_container_node_pool.go",
    "gcp:container/cluster:Cluster": f"{DIR}/resource_container_cluster.go",
}
_FIELD = re.compile(r'^\s*"([a-z0-9_]+)":\s*(\{|[A-Za-z]\w*\(\))')


def force_new_paths(text: str, start: str | None = None) -> list[str]:
    """The dotted paths of the fields marked ForceNew in a Go schema literal, nesting followed by
    braces (`start`: only from the function of that name on, to its end)."""
    lines = text.splitlines()
    if start is not None:
        begin = next(i for i, line in enumerate(lines) if line.startswith(f"func {start}"))
        end = next(i for i in range(begin + 1, len(lines)) if lines[i].startswith("}"))
        lines = lines[begin : end + 1]
    paths: list[str] = []
    stack: list[tuple[str, int]] = []
    depth = 0
    for line in lines:
        match = _FIELD.match(line)
        if match and match.group(2) == "{":
            stack.append((match.group(1), depth))
        elif match and match.group(2) in EMBEDDED:
            prefix = ".".join([*(name for name, _ in stack), match.group(1)])
            paths.append(f"@{match.group(2)}:{prefix}")
        if re.search(r"ForceNew:\s*true", line) and stack:
            paths.append(".".join(name for name, _ in stack))
        depth += line.count("{") - line.count("}")
        while stack and depth <= stack[-1][1]:
            stack.pop()
    return paths


def resource_paths(checkout: Path, path: str) -> list[str]:
    result: list[str] = []
    for entry in force_new_paths((checkout / path).read_text(encoding="utf-8")):
        if entry.startswith("@"):
            call, prefix = entry[1:].split(":", 1)
            embedded = (checkout / EMBEDDED[call]).read_text(encoding="utf-8")
            result += [f"{prefix}.{p}" for p in force_new_paths(embedded, call.removesuffix("()"))]
        else:
            result.append(entry)
    return sorted(set(result))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of hashicorp/terraform-provider-google-beta")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--date", required=True)
    args = parser.parse_args(argv)
    document = {
        "source": f"hashicorp/terraform-provider-google-beta@{args.commit} ({args.date})",
        "files": sorted({*RESOURCES.values(), *EMBEDDED.values()}),
        "generatedBy": "tools/provider_force_new.py",
        "forceNew": {token: resource_paths(args.checkout, path) for token, path in RESOURCES.items()},
    }
    OUT.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
