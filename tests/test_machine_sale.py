"""Machines sold as they are sold (issue 24, item 5): a machine type Compute Engine does not sell on demand
needs Spot, flex-start or a reservation; the rule lives in the catalog's machine data with its source."""

from __future__ import annotations

from typing import Any

import pytest

from gke_gpu.core.catalog import load_catalog
from gke_gpu.stack.config import ConfigError, parse_settings
from tests.conftest import STANDARD_CLUSTER

A3_1G = {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 1, "maxNodes": 1}


def warnings_for(pool: dict[str, Any], **options: Any) -> list[str]:
    raw = {"cluster": STANDARD_CLUSTER, "gpuPools": [pool]}
    return parse_settings(raw, project="test-project", region="us-central1", stack="test", **options)[1]


def test_the_catalog_says_which_a3_high_shapes_are_not_sold_on_demand() -> None:
    machines = load_catalog().accelerator("nvidia-h100-80gb").machine_types  # type: ignore[union-attr]
    assert {n for n, m in machines.items() if not m.on_demand} == {
        "a3-highgpu-1g",
        "a3-highgpu-2g",
        "a3-highgpu-4g",
    }
    # Reported, not read in Compute Engine's own table: a note, not a refusal.
    assert not any(m.on_demand_confirmed for m in machines.values() if not m.on_demand)


def test_an_on_demand_a3_high_1g_pool_gets_a_note_naming_spot_and_flex_start() -> None:
    assert warnings_for(A3_1G) == [
        "note: gke-gpu:gpuPools[0]: a3-highgpu-1g is not sold on demand, only as Spot, flex-start or "
        "reserved capacity: set spot: true, flexStart: true or a SPECIFIC reservation, or use a machine sold "
        "on demand (a3-edgegpu-8g, a3-highgpu-8g) (reported, not confirmed in Compute Engine's docs: nodes "
        "may never start)"
    ]


@pytest.mark.parametrize(
    "pool",
    [{**A3_1G, "spot": True}, {**A3_1G, "gpusPerNode": 8}, {**A3_1G, "gpusPerNode": 4, "spot": True}],
    ids=["spot", "8g", "4g-spot"],
)
def test_spot_or_an_8_gpu_machine_needs_no_note(pool: dict[str, Any]) -> None:
    assert not any("not sold on demand" in w for w in warnings_for(pool))


def test_a_confirmed_rule_refuses_the_pool() -> None:
    catalog = load_catalog()
    h100 = catalog.accelerator("nvidia-h100-80gb")
    assert h100 is not None
    machines = {
        n: m._replace(on_demand_confirmed=True) if not m.on_demand else m
        for n, m in h100.machine_types.items()
    }
    confirmed = catalog._replace(
        accelerators={**catalog.accelerators, h100.name: h100._replace(machine_types=machines)},
    )
    with pytest.raises(ConfigError) as refused:
        warnings_for({**A3_1G, "gpusPerNode": 2}, catalog=confirmed)
    assert "gke-gpu:gpuPools[0].gpusPerNode: a3-highgpu-2g is not sold on demand" in str(refused.value)
