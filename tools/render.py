#!/usr/bin/env python3
"""Offline render: what `pulumi up` would create for a stack, without the CLI, credentials or network.

    python tools/render.py --stack dev              # a tree with the key settings of each resource
    python tools/render.py --stack dev --json       # the same as data (the golden-plan format)
    python tools/render.py --stack prod --out DIR   # also DIR/manifests/*.yaml and DIR/dashboard.json
    python tools/render.py --stack prod --diff OLD.json   # changed inputs per resource, REPLACE marks

It runs the very same `__main__.py` under the Pulumi SDK's mocks with the config of
`Pulumi.<stack>.yaml`. Exit codes: 0 the stack is valid, 2 its config is not (the message names the
key), 1 anything else (a bug: the traceback is printed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import plan
from tools.offline import ROOT, run_stack, stacks

EXIT_OK, EXIT_BUG, EXIT_INVALID = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Render a stack offline: the resources `pulumi up` would create.",
    )
    parser.add_argument("--stack", required=True, help=f"stack name ({', '.join(stacks())})")
    parser.add_argument(
        "--stack-dir",
        type=Path,
        default=ROOT,
        help="directory of the Pulumi.<stack>.yaml files (default: repo)",
    )
    parser.add_argument("--json", action="store_true", help="print the render as JSON")
    parser.add_argument("--out", type=Path, help="write manifests/ and dashboard.json here")
    parser.add_argument("--diff", type=Path, metavar="OLD.json", help="compare with an earlier --json render")
    args = parser.parse_args(argv)

    try:
        result = run_stack(args.stack, directory=args.stack_dir)
    except FileNotFoundError as exc:
        print(f"error: {exc}; stacks: {', '.join(stacks(args.stack_dir))}", file=sys.stderr)
        return EXIT_INVALID
    error = result.error
    if error is not None:
        from components.config import ConfigError

        if isinstance(error, ConfigError):
            print(f"error: stack {args.stack}: {error}", file=sys.stderr)
            return EXIT_INVALID
        raise error

    document = plan.to_document(result)
    if args.diff is not None:
        try:
            old = plan.load_document(args.diff)
        except plan.NotARenderError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_INVALID
        print(plan.format_diff(plan.diff(old, document)))
    elif args.json:
        print(plan.dumps(document))
    else:
        print(plan.format_tree(document))
    if args.out is not None:
        written = plan.write_out(document, args.out)
        print(f"wrote {len(written)} file(s) under {args.out}", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `render.py ... | head`: the reader left; not an error of the render
        sys.stderr.close()
        sys.exit(EXIT_OK)
