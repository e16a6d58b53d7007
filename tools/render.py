#!/usr/bin/env python3
"""Offline render: what `pulumi up` would create for a stack, without the CLI, credentials or network.

    python tools/render.py --stack dev              # a tree with the key settings of each resource
    python tools/render.py --stack dev --json       # the same as data (the golden-plan format)
    python tools/render.py --stack prod --out DIR   # also DIR/manifests/*.yaml and DIR/dashboard.json
    python tools/render.py --stack prod --diff OLD.json   # changed inputs per resource, REPLACE marks

It runs the very same `__main__.py` under the Pulumi SDK's mocks with the config of
`Pulumi.<stack>.yaml`, then runs the policy pack's rules (`policy/`, as `tools/check_policies.py`
does) over the result. The program's warnings and the policy verdict come first: at the top of the
tree, or on stderr with --json and --diff; --json also carries them (`warnings`, always a list, and
`policy`). --out DIR writes into a new or empty directory, or one that holds an earlier render, whose
files it replaces (manifests and a dashboard that are gone do not linger).

Exit codes:
  0  the stack is valid and violates no mandatory policy (advisory ones are printed);
  1  a bug in the program or in these tools: the traceback is printed;
  2  invalid input, nothing rendered: a stack file that cannot be read (``Pulumi.<stack>.yaml:LINE:
     what is wrong``), invalid config (the message names each key), an --out or --diff path that
     does not fit, or a Python without the project's virtualenv;
  3  the stack renders (and --out is written) but violates a mandatory policy: printed first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from gke_gpu.stack.stack_file import StackFileError
    from tools.offline import ROOT, run_stack, stacks
except ModuleNotFoundError as exc:  # not the project's virtualenv: say how to get it, no traceback
    from tools.venv_guard import exit_without_venv

    exit_without_venv(exc, __name__, "tools/render.py")

EXIT_OK, EXIT_BUG, EXIT_INVALID, EXIT_POLICY = 0, 1, 2, 3


def policy_report(document: dict[str, Any]) -> dict[str, Any]:
    """The policy pack's verdict on the render, or why it was not checked (pulumi-policy absent)."""
    try:
        from tools import check_policies
    except ModuleNotFoundError as exc:
        if exc.name == "pulumi_policy":  # the quick start's install: the pack is the dev install's
            return {
                "checked": False,
                "optional": True,
                "reason": "the policy pack is an optional check that the dev install adds "
                "(`.venv/bin/pip install -r requirements-dev.txt`); `pulumi preview --policy-pack policy` "
                "runs it too",
            }
        return {
            "checked": False,
            "reason": f"the Python module {exc.name!r} is missing (it comes with requirements-dev.txt: "
            "`.venv/bin/pip install -r requirements-dev.txt`)",
        }
    return check_policies.report(document)


def _plan() -> ModuleType:
    """tools.plan, imported once a render needs it: it loads the GPU pool's module and with it the
    cloud SDKs (seconds), which a stack file the program refuses never needs."""
    from tools import plan

    return plan


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_INVALID


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
    parser.add_argument("--out", type=Path, help="write manifests/, dashboard.json and render.json here")
    parser.add_argument("--diff", type=Path, metavar="OLD.json", help="compare with an earlier --json render")
    args = parser.parse_args(argv)

    old = None
    try:
        if args.out is not None or args.diff is not None:
            plan = _plan()
            if args.out is not None:
                plan.check_out_dir(args.out)
            old = plan.load_document(args.diff) if args.diff is not None else None
        result = run_stack(args.stack, directory=args.stack_dir)
    except FileNotFoundError as exc:
        return _error(f"{exc}; stacks: {', '.join(stacks(args.stack_dir)) or 'none'}")
    except StackFileError as exc:
        return _error(str(exc))
    except ValueError as exc:  # --out or --diff (OutDirError, NotARenderError)
        if isinstance(exc, (_plan().OutDirError, _plan().NotARenderError)):
            return _error(str(exc))
        raise
    error = result.error
    if error is not None:
        from gke_gpu.core.validation import InvalidArgsError
        from gke_gpu.stack.config import ConfigError

        # InvalidArgsError: a component refused its args; check_components keeps a stack file from
        # getting there, but a program of one's own (--stack-dir) may not call it.
        if isinstance(error, (ConfigError, StackFileError, InvalidArgsError)):
            return _error(f"stack {args.stack}: {error}")
        raise error

    plan = _plan()
    document = plan.to_document(result)
    document["policy"] = policy_report(document)
    if args.diff is not None or args.json:
        for line in plan.format_header(document):
            print(line, file=sys.stderr)
    if old is not None:
        print(plan.format_diff(plan.diff(old, document)))
    elif args.json:
        print(plan.dumps(document))
    else:
        print(plan.format_tree(document))
    if args.out is not None:
        try:
            written = plan.write_out(document, args.out)
        except (plan.OutDirError, OSError) as exc:
            return _error(str(exc))
        print(f"wrote {len(written)} file(s) under {args.out}", file=sys.stderr)
    policy = document["policy"]
    if policy.get("checked") and not policy.get("passed"):
        print(
            f"error: stack {args.stack} violates {policy['mandatory']} mandatory policy(ies) of "
            f"{policy['pack']} (listed above); `pulumi preview --policy-pack policy` would refuse it",
            file=sys.stderr,
        )
        return EXIT_POLICY
    return EXIT_OK


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `render.py ... | head`: the reader left; not an error of the render
        sys.stderr.close()
        sys.exit(EXIT_OK)
