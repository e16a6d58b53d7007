"""The accelerator catalog is internally consistent (a typo in the YAML fails here, not in GKE)."""

from __future__ import annotations

import re

import pytest

from gke_gpu.core.catalog import load_catalog

CATALOG = load_catalog()
ACCELERATORS = sorted(CATALOG.accelerators)
REQUIRED_REGIONS = ("us-central1", "us-east4", "us-west1", "europe-west4", "asia-northeast1")


def test_catalog_is_dated_and_covers_the_required_regions() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", CATALOG.captured)
    for region in REQUIRED_REGIONS:
        assert region in CATALOG.regions


def test_the_issue_accelerators_are_all_there() -> None:
    for name in (
        "nvidia-tesla-t4",
        "nvidia-l4",
        "nvidia-tesla-a100",
        "nvidia-a100-80gb",
        "nvidia-h100-80gb",
        "nvidia-h100-mega-80gb",
        "nvidia-h200-141gb",
        "nvidia-b200",
    ):
        assert name in CATALOG.accelerators


@pytest.mark.parametrize("name", ACCELERATORS)
def test_default_machine_types_carry_that_many_gpus(name: str) -> None:
    acc = CATALOG.accelerators[name]
    assert acc.default_machine_types, name
    for count, machine_name in acc.default_machine_types.items():
        machine = acc.machine_type(machine_name)
        assert machine is not None, f"{name}: default {machine_name} is not a machine type of it"
        assert count in acc.counts_for(machine), f"{name}: {machine_name} cannot take {count} GPUs"
        assert CATALOG.boot_disk_types(machine), f"{machine_name}: no boot disk types"
    assert set(acc.default_machine_types) == set(acc.allowed_counts), name


@pytest.mark.parametrize("name", ACCELERATORS)
def test_zones_belong_to_their_region(name: str) -> None:
    for region, zones in CATALOG.accelerators[name].zones.items():
        assert zones, f"{name} {region}: empty zone list"
        for zone in zones:
            assert re.fullmatch(rf"{region}-[a-z]", zone), f"{name}: {zone} not in {region}"


@pytest.mark.parametrize("name", ACCELERATORS)
def test_mig_partitions_and_autopilot_counts_are_sane(name: str) -> None:
    acc = CATALOG.accelerators[name]
    for size, per_gpu in acc.mig_partitions.items():
        assert re.fullmatch(r"\d+g\.\d+gb", size), size
        assert 1 <= per_gpu <= 7
        assert int(size.split("g.")[1][:-2]) <= acc.memory_gb
    assert set(acc.autopilot_counts) <= set(acc.allowed_counts)


def test_gpus_without_mig_have_none() -> None:
    for name in ("nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-v100"):
        assert CATALOG.accelerators[name].mig_partitions == {}


def test_n1_limits() -> None:
    t4 = CATALOG.accelerators["nvidia-tesla-t4"]
    assert t4.counts_for(t4.machine_type("n1-standard-8")) == (1, 2, 4)
    assert t4.counts_for(t4.machine_type("n1-standard-64")) == (4,)
    assert t4.machine_type("n1-standard-3") is None
    assert t4.machine_type("n2-standard-8") is None
    v100 = CATALOG.accelerators["nvidia-tesla-v100"]
    assert v100.counts_for(v100.machine_type("n1-standard-16")) == (2, 4, 8)


@pytest.mark.parametrize("name", ["accelerators.yaml", "prices.yaml", "provider_config_keys.yaml"])
def test_the_data_files_read_the_same_with_either_yaml_loader(name: str) -> None:
    """core/data.py reads the package's data with libyaml's loader where PyYAML has it: it must give
    the same documents as the pure-Python one."""
    import yaml

    from gke_gpu.core.data import DATA_DIR, load_yaml

    assert hasattr(yaml, "CSafeLoader"), "PyYAML without libyaml: the fast path is not taken here"
    text = (DATA_DIR / name).read_text(encoding="utf-8")
    assert load_yaml(DATA_DIR / name) == yaml.load(text, Loader=yaml.SafeLoader)
