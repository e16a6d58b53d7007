"""The data behind every answer carries its source and the date it was read, in the data file itself
(issue 26): each accelerator's zones and machine shapes, each machine series, the price table; and a
zone refusal or a price says the date of the data it used."""

import datetime
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core.data import DATA_DIR
from tests.conftest import STANDARD_CLUSTER, config_error, stack_render

TODAY = datetime.date(2026, 11, 28)  # the last day an entry was read (GPU-MT, WLP): none was read later


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((DATA_DIR / name).read_text(encoding="utf-8"))


def _legend(name: str) -> set[str]:
    """The source keys a data file's header defines (`#   SKY9     skypilot-org/...`)."""
    header = (DATA_DIR / name).read_text(encoding="utf-8").split("\n\n", 1)[0]
    return set(re.findall(r"^#   ([A-Z][A-Z0-9-]+)\s{2,}\S", header, re.M))


def _read_date(value: Any, where: str) -> None:
    assert isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value), f"{where}: read {value!r}"
    assert datetime.date.fromisoformat(value) <= TODAY, f"{where}: read in the future ({value})"


ACCELERATORS = _load("accelerators.yaml")["accelerators"]


@pytest.mark.parametrize("name", sorted(ACCELERATORS))
def test_every_accelerator_says_where_its_zones_and_shapes_come_from_and_when(name: str) -> None:
    source = ACCELERATORS[name].get("source")
    assert isinstance(source, dict), f"{name}: no source"
    legend = _legend("accelerators.yaml")
    assert {"zones", "shapes", "read"} <= set(source), f"{name}: {source}"
    assert source["zones"] in legend and source["shapes"] in legend, f"{name}: {source} (sources: {legend})"
    _read_date(source["read"], name)


SERIES = _load("machine_types.yaml")["series"]


@pytest.mark.parametrize("name", sorted(SERIES))
def test_every_machine_series_says_where_its_shapes_come_from_and_when(name: str) -> None:
    entry = SERIES[name]
    legend = _legend("machine_types.yaml")
    assert entry.get("sources") and set(entry["sources"]) <= legend, (
        f"{name}: {entry.get('sources')} ({legend})"
    )
    _read_date(entry.get("read"), name)


def test_the_price_table_says_its_one_source_and_when_it_was_read() -> None:
    prices = _load("prices.yaml")
    assert prices["source"] and prices["sourceUrl"].startswith("https://")
    _read_date(prices["captured"], "prices.yaml captured")
    _read_date(prices["retrieved"], "prices.yaml retrieved")
    # One source for every figure: no entry claims another.
    for region, entries in prices["regions"].items():
        for machine, entry in entries.items():
            assert set(entry) <= {"onDemand", "spot", "flags"}, f"{region}.{machine}: {entry}"


def test_a_zone_refusal_says_the_date_of_the_zone_data() -> None:
    pool = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2, "zones": ["us-central1-f"]}
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [pool]})
    read = ACCELERATORS["nvidia-l4"]["source"]["read"]
    assert (
        "gke-gpu:gpuPools[0].zones[0]: 'us-central1-f' does not offer nvidia-l4; zones of us-central1 that "
        "do: us-central1-a, us-central1-b, us-central1-c (zone data: accelerators.yaml, source SKY9, "
        f"read {read})"
    ) in message


def test_a_price_in_the_render_says_the_date_of_the_prices() -> None:
    from tools import plan

    tree = plan.format_tree(plan.to_document(stack_render("dev")))
    captured = _load("prices.yaml")["captured"]
    assert f"captured {captured} or later" in tree


def test_the_legend_reader_finds_the_sources() -> None:
    assert {"SKY9", "GKE-MT", "AOM", "RN-A4X"} <= _legend("accelerators.yaml")
    assert {"CA", "TFL", "GPM", "CSV"} <= _legend("machine_types.yaml")
    assert Path(DATA_DIR / "accelerators.yaml").is_file()
