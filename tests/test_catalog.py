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


# Every GPU machine type Compute Engine's "GPU machine types" page lists (docs.cloud.google.com/compute/
# docs/gpus, last updated 2026-04-14, read 2026-11-28; catalog source GPU-MT), with its accelerator and
# GPU count (fractional G4 as 0), and the accelerators N1 machines attach.
GPU_MACHINE_TYPES = {
    "a4x-maxgpu-4g-metal": ("nvidia-gb300", 4),
    "a4x-highgpu-4g": ("nvidia-gb200", 4),
    "a4-highgpu-8g": ("nvidia-b200", 8),
    "a3-ultragpu-8g": ("nvidia-h200-141gb", 8),
    "a3-megagpu-8g": ("nvidia-h100-mega-80gb", 8),
    **{f"a3-highgpu-{n}g": ("nvidia-h100-80gb", n) for n in (1, 2, 4, 8)},
    "a3-edgegpu-8g": ("nvidia-h100-80gb", 8),
    **{f"a2-ultragpu-{n}g": ("nvidia-a100-80gb", n) for n in (1, 2, 4, 8)},
    **{f"a2-highgpu-{n}g": ("nvidia-tesla-a100", n) for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": ("nvidia-tesla-a100", 16),
    **{f"g4-standard-{v}": ("nvidia-rtx-pro-6000", 0) for v in (6, 12, 24)},
    "g4-standard-48": ("nvidia-rtx-pro-6000", 1),
    "g4-standard-96": ("nvidia-rtx-pro-6000", 2),
    "g4-standard-192": ("nvidia-rtx-pro-6000", 4),
    "g4-standard-384": ("nvidia-rtx-pro-6000", 8),
    **{f"g2-standard-{v}": ("nvidia-l4", n) for v, n in ((4, 1), (8, 1), (12, 1), (16, 1), (32, 1))},
    "g2-standard-24": ("nvidia-l4", 2),
    "g2-standard-48": ("nvidia-l4", 4),
    "g2-standard-96": ("nvidia-l4", 8),
}
N1_ACCELERATORS = ("nvidia-tesla-t4", "nvidia-tesla-p4", "nvidia-tesla-v100", "nvidia-tesla-p100")


@pytest.mark.parametrize("machine", sorted(GPU_MACHINE_TYPES))
def test_every_gpu_machine_compute_engine_lists_is_in_the_catalog(machine: str) -> None:
    accelerator_name, gpus = GPU_MACHINE_TYPES[machine]
    accelerator = CATALOG.accelerator(accelerator_name)
    assert accelerator is not None, accelerator_name
    if gpus == 0:
        assert machine in accelerator.fractional_machine_types, (
            f"{machine}: fractional, refused with a reason"
        )
    else:
        found = accelerator.machine_type(machine)
        assert found is not None and found.gpus == gpus, machine


def test_every_accelerator_n1_attaches_is_in_the_catalog() -> None:
    for name in N1_ACCELERATORS:
        accelerator = CATALOG.accelerator(name)
        assert accelerator is not None and accelerator.attachable, name


def test_nvl72_racks_carry_their_nvlink_domain() -> None:
    for name in ("nvidia-gb200", "nvidia-gb300"):
        accelerator = CATALOG.accelerator(name)
        assert accelerator is not None and accelerator.nvlink_domain is not None
        (machine,) = accelerator.machine_types.values()
        domain = accelerator.nvlink_domain
        assert (domain.accelerator_topology, domain.vms * machine.gpus) == ("1x72", 72)
        assert accelerator.arch == "arm64" and not machine.on_demand and not accelerator.spot
