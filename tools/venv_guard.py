"""The one message a tool gives when it runs outside the project's virtualenv (no traceback).

Standard library only: it must import where the virtualenv's packages are missing."""

from __future__ import annotations

import sys
from typing import NoReturn

# A missing module of our own is a bug, not a missing virtualenv. (gke_gpu is not one of them here:
# it is components/, installed into the virtualenv by requirements.txt's `-e .`.)
_FIRST_PARTY = ("tools", "policy")


def exit_without_venv(exc: ModuleNotFoundError, module_name: str, script: str) -> NoReturn:
    """Exit 2 saying how to create the venv, when `script` runs as a program and a third-party module
    is missing; otherwise (imported, or one of our modules is missing) re-raise `exc`."""
    if module_name != "__main__" or (exc.name or "").partition(".")[0] in _FIRST_PARTY:
        raise exc
    print(
        f"error: the Python module {exc.name!r} is missing: run the tools with the project's virtualenv:\n"
        "  python3 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt\n"
        f"  .venv/bin/python {script} {' '.join(sys.argv[1:])}",
        file=sys.stderr,
    )
    sys.exit(2)
