"""The files shipped with the package (components/data/, components/scripts/): where they are, and
how the data files are read.

They are read with libyaml's loader where PyYAML has it (the wheels for every common platform do):
the same documents as the pure-Python loader (tests/test_catalog.py checks it), about 7x faster, which
a render pays once for the catalog, the price table and the provider's keys. A user's stack file is
not read here: stack/stack_file.py parses it event by event, with the pure-Python parser whose error
messages it reports.
"""

from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).parents[1] / "data"
# The scripts the sample and test Pods run, mounted from ConfigMaps.
SCRIPTS_DIR = Path(__file__).parents[1] / "scripts"
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path) -> Any:
    """One of the package's own YAML files, parsed."""
    with path.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_LOADER)
