"""The price table (``components/data/prices.yaml``), what one node costs by it, and the arithmetic on
its figures.

`load_prices` reads the table once: per region, USD per hour for each machine type (and, for N1, each
attached GPU, ``gpu/<accelerator>``), on-demand and Spot, None where unknown, with flags that say why.
`node_price` prices one node: the VM, plus its GPUs on N1. A figure is a number of USD or `NA`; a
figure that depends on an `NA` is `NA`, and zero nodes cost 0 whatever the price.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gke_gpu.core.data import DATA_DIR, load_data

PRICES_PATH = DATA_DIR / "prices.yaml"
HOURS_PER_MONTH = 730
NA = "n/a"
ON_DEMAND, SPOT = "onDemand", "spot"
COLUMNS = (ON_DEMAND, SPOT)
_LABELS = {ON_DEMAND: "on-demand", SPOT: "Spot"}
# Flags that concern one column only; any other flag concerns both.
_FLAG_COLUMNS = {"onDemandSuspect": (ON_DEMAND,), "onDemandMayNotBeOffered": (ON_DEMAND,)}

Figure = float | str  # a number of USD, or NA


# --------------------------------------------------------------------------------------------------
# The price table.


class Price(NamedTuple):
    """One entry of the table: USD per hour, None where unknown."""

    on_demand: float | None
    spot: float | None
    flags: tuple[str, ...] = ()

    def get(self, column: str) -> float | None:
        return self.on_demand if column == ON_DEMAND else self.spot


class PriceTable(NamedTuple):
    source: str
    source_url: str
    captured: str
    captured_is_lower_bound: bool
    currency: str
    flags: Mapping[str, str]
    fee_per_cluster_hour: float
    free_tier_credit_per_month: float
    regions: Mapping[str, Mapping[str, Price]]

    def price(self, region: str, key: str) -> Price | None:
        return self.regions.get(region, {}).get(key)


def _parse_prices(raw: Mapping[str, Any]) -> PriceTable:
    regions: dict[str, dict[str, Price]] = {}
    for region, entries in (raw.get("regions") or {}).items():
        regions[region] = {
            key: Price(
                on_demand=None if e.get("onDemand") is None else float(e["onDemand"]),
                spot=None if e.get("spot") is None else float(e["spot"]),
                flags=tuple(e.get("flags") or ()),
            )
            for key, e in (entries or {}).items()
        }
    fee = raw["gkeManagementFee"]
    return PriceTable(
        source=str(raw["source"]),
        source_url=str(raw.get("sourceUrl", "")),
        captured=str(raw["captured"]),
        captured_is_lower_bound=bool(raw.get("capturedIsLowerBound", False)),
        currency=str(raw.get("currency", "USD")),
        flags={str(k): " ".join(str(v).split()) for k, v in (raw.get("flags") or {}).items()},
        fee_per_cluster_hour=float(fee["perClusterHour"]),
        free_tier_credit_per_month=float(fee["freeTierCreditPerMonth"]),
        regions=regions,
    )


@functools.cache
def load_prices(path: Path = PRICES_PATH) -> PriceTable:
    """Load and cache the price table shipped with the program."""
    return _parse_prices(load_data(path))


# --------------------------------------------------------------------------------------------------
# Arithmetic on figures that may be NA.


def _hourly(value: float) -> float:
    return round(value, 5)


def _monthly(hourly: Figure) -> Figure:
    return NA if isinstance(hourly, str) else round(hourly * HOURS_PER_MONTH, 2)


def _times(count: int | str, price: float | None) -> Figure:
    """`count` nodes at `price` each: zero nodes cost 0 whatever the price."""
    if count == 0:
        return 0.0
    if isinstance(count, str) or price is None:
        return NA
    return _hourly(count * price)


def _sum(values: Iterable[Figure]) -> Figure:
    total = 0.0
    for value in values:
        if isinstance(value, str):
            return NA
        total += value
    return _hourly(total)


def _unique(texts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def _count(values: Iterable[int | str]) -> int | str:
    numbers = list(values)
    return NA if any(isinstance(v, str) for v in numbers) else sum(int(v) for v in numbers)


# --------------------------------------------------------------------------------------------------
# One node.


@dataclass
class NodePrice:
    """The price of one node (or, on Autopilot, one GPU Pod's node) per column."""

    hourly: dict[str, float | None]
    reasons: dict[str, str]
    notes: list[str]


def node_price(table: PriceTable, region: str, machine: str | None, accelerator: str, gpus: int) -> NodePrice:
    """One node's hourly price per column (None with a reason where the table has none)."""
    result = NodePrice({c: None for c in COLUMNS}, {}, [])
    if not machine:
        for c in COLUMNS:
            result.reasons[c] = f"no machine type for {gpus} x {accelerator}, so no price"
        return result
    keys = [machine]
    if machine.startswith("n1-"):
        keys.append(f"gpu/{accelerator}")
    entries = {key: table.price(region, key) for key in keys}
    for column in COLUMNS:
        label = _LABELS[column]
        total = 0.0
        for key, entry in entries.items():
            if entry is None:
                result.reasons[column] = f"no price for {key} in {region}: not in the price table"
                break
            value = entry.get(column)
            if value is None:
                why = [table.flags[f] for f in entry.flags if column in _FLAG_COLUMNS.get(f, COLUMNS)]
                result.reasons[column] = f"{label} price unknown for {key} in {region}" + (
                    f": {'; '.join(why)}" if why else ""
                )
                break
            total += value * (gpus if key.startswith("gpu/") else 1)
            for flag in entry.flags:
                if column in _FLAG_COLUMNS.get(flag, COLUMNS) and flag in table.flags:
                    note = f"{key} in {region}, {label}: {table.flags[flag]}"
                    if note not in result.notes:
                        result.notes.append(note)
        else:
            result.hourly[column] = _hourly(total)
    return result


def pool_node_price(
    table: PriceTable, region: str, pool: Mapping[str, Any], machine: str | None
) -> NodePrice:
    """A node's price in a pool of the render (`outputs.gpuPools`): `node_price`, less the on-demand
    column where Dynamic Workload Scheduler capacity (flex-start, queued provisioning) bills at its
    own (discounted) prices, which the table does not carry."""
    price = node_price(
        table, region, machine, str(pool.get("accelerator")), int(pool.get("gpusPerNode") or 0)
    )
    if pool.get("flexStart") or pool.get("queuedProvisioning"):
        how = "queued-provisioning nodes" if pool.get("queuedProvisioning") else "flex-start VMs"
        price.hourly[ON_DEMAND] = None
        price.reasons[ON_DEMAND] = (
            f"{how} are billed at Dynamic Workload Scheduler prices, which the price table does not "
            "have (cloud.google.com/products/dws/pricing)"
        )
    return price
