#!/usr/bin/env python3
"""Write or check the JSON copies of the package's data files (components/core/data.py says why).

    .venv/bin/python tools/data_json.py           # write components/data/<name>.yaml.json for each
    .venv/bin/python tools/data_json.py --check   # exit 1 when a copy is missing or stale

Run it after editing one of the YAML files in core.data.JSON_COPIES; until then a render reads that
YAML itself (slower, never stale), and tests/test_data_json.py fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gke_gpu.core.data import DATA_DIR, JSON_COPIES, json_copy_path, load_yaml, parse_json_copy, source_digest


def json_copy(path: Path) -> str:
    """The JSON copy of the YAML file `path`; ValueError when JSON cannot give back its document."""
    data: Any = load_yaml(path)
    text = json.dumps(
        {"sourceSha256": source_digest(path.read_bytes()), "data": data}, indent=1, ensure_ascii=False
    )
    if parse_json_copy(text)["data"] != data:
        raise ValueError(f"{path}: its JSON copy would not read back as the same document")
    return text + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that every copy is current")
    args = parser.parse_args(argv)
    stale = []
    for name in JSON_COPIES:
        path = DATA_DIR / name
        text = json_copy(path)
        target = json_copy_path(path)
        current = target.read_text(encoding="utf-8") if target.is_file() else None
        if current == text:
            continue
        if args.check:
            stale.append(target.name)
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(DATA_DIR.parent.parent)}")
    if stale:
        print(f"stale JSON copies: {', '.join(stale)}; run tools/data_json.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
