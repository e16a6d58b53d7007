"""The files shipped with the package (components/data/, components/scripts/): where they are, and
how the data files are read.

They are read with libyaml's loader where PyYAML has it (the wheels for every common platform do):
the same documents as the pure-Python loader (tests/test_catalog.py checks it), about 7x faster. A
user's stack file is not read here: stack/stack_file.py parses it event by event, with the pure-Python
parser whose error messages it reports.

The data files a render reads (the catalog, the machine types, the price table, the provider's keys,
the boot disks, the model catalog) each have a JSON copy beside them, `<name>.yaml.json`, which
`tools/data_json.py` writes: the YAML, with its sources and comments, stays the source of truth, and
the copy is read in its place only while it was written from the very same YAML text (its
`sourceSha256`), so an edited YAML is never shadowed. Reading the JSON takes ~0.5 ms where the YAML
took ~15 ms of every render; tests/test_data_json.py checks that each copy is current and gives the
same document.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).parents[1] / "data"
# The scripts the sample and test Pods run, mounted from ConfigMaps.
SCRIPTS_DIR = Path(__file__).parents[1] / "scripts"
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# The data files with a JSON copy (tools/data_json.py writes them).
JSON_COPIES = (
    "accelerators.yaml",
    "boot_disks.yaml",
    "machine_types.yaml",
    "models.yaml",
    "prices.yaml",
    "provider_config_keys.yaml",
)


def load_yaml(path: Path) -> Any:
    """One of the package's own YAML files, parsed."""
    with path.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_LOADER)


def json_copy_path(path: Path) -> Path:
    """Where the JSON copy of the data file `path` lives: beside it, `<name>.yaml.json`."""
    return path.with_name(path.name + ".json")


def source_digest(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


def _int_keys(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    """A JSON object's pairs as the YAML's mapping: JSON writes an integer key (`attachLimits: {1: ...}`)
    as a string, read back as the integer (tools/data_json.py refuses a YAML this would not restore)."""
    return {
        int(key) if key.isascii() and key.isdigit() and str(int(key)) == key else key: value
        for key, value in pairs
    }


def parse_json_copy(text: str) -> dict[str, Any]:
    """A JSON copy: `{"sourceSha256": ..., "data": <the YAML's document>}`."""
    copy: dict[str, Any] = json.loads(text, object_pairs_hook=_int_keys)
    return copy


def load_data(path: Path) -> Any:
    """A data file of the package, parsed: from its JSON copy while that copy was written from this
    file's text (see the module's docstring), else from the YAML itself."""
    source = path.read_bytes()
    copy_path = json_copy_path(path)
    if copy_path.is_file():
        copy = parse_json_copy(copy_path.read_text(encoding="utf-8"))
        if copy.get("sourceSha256") == source_digest(source):
            return copy["data"]
    return yaml.load(source, Loader=_LOADER)
