"""The cost estimate as text: the table of `tools/cost.py`'s `estimate`, one row per pool and pricing
column, then the management fee and the totals, then every note and reason wrapped as a list.

The lines go into the render's tree (`tools/plan_tree.py`) and the render document's ``cost.table``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from tools.prices import _LABELS, COLUMNS, NA, ON_DEMAND, SPOT, Figure, _unique

_WRAP = 110


def _dollars(value: Figure) -> str:
    return value if isinstance(value, str) else f"${value:,.2f}"


def _money(value: Figure) -> str:
    return value if isinstance(value, str) else f"{value:,.2f}"


def _range(low: Any, high: Any) -> str:
    return f"{low}..{'∞' if high == NA else high}"


def _cells(figures: Mapping[str, Any], column: str, periods: tuple[str, str]) -> list[str]:
    """$/h min, $/h max, $/month min, $/month max of one column."""
    return [_money(figures[period][at][column]) for period in periods for at in ("atMin", "atMax")]


def format_table(cost: Mapping[str, Any], *, stack: str | None = None) -> list[str]:
    """The estimate as text lines: one row per pool and pricing column, fee, totals, then notes."""
    if cost.get("error"):
        return [f"GPU cost estimate: not available: {cost['error']}"]
    where = f"stack {stack}, " if stack else ""
    title = (
        f"GPU cost estimate ({where}region {cost['region']}, {cost['currency']} list prices, "
        f"{cost['hoursPerMonth']} h/month; * = the pool's own pricing)"
    )
    header = ["pool", "machine", "GPUs", "pricing", "$/h min", "$/h max", "$/month min", "$/month max"]
    hourly_monthly = ("hourly", "monthly")
    rows: list[tuple[list[str] | str, list[str]]] = []
    for p in cost["pools"]:
        first = [
            p["name"] + (" (Autopilot)" if p["kind"] == "autopilot-profile" else ""),
            f"{p['machineType'] or NA} ({p['gpusPerNode']} GPU)",
            _range(p["gpusAtMin"], p["gpusAtMax"]),
        ]
        for index, column in enumerate(COLUMNS):
            label = _LABELS[column] + (" *" if p["expected"] == column else "")
            cells = [*(first if index == 0 else ["", "", ""]), label]
            rows.append((cells, _cells(p, column, hourly_monthly)))
    if not rows:
        rows.append(("(no GPU pools)", [_money(0.0)] * 4))
    totals, fee = cost["totals"], cost["managementFee"]
    spans: list[tuple[str, list[str]]] = [
        ("GPU pools, each pool's own pricing *", _cells(totals, "expected", ("gpuHourly", "gpuMonthly"))),
        (
            f"GKE management fee ({fee['clusterType']})",
            [_money(fee["hourly"])] * 2 + [_money(fee["monthly"])] * 2,
        ),
        ("total, each pool's own pricing *", _cells(totals, "expected", hourly_monthly)),
        ("total, all on-demand", _cells(totals, ON_DEMAND, hourly_monthly)),
        ("total, all Spot", _cells(totals, SPOT, hourly_monthly)),
    ]

    left_widths = [len(h) for h in header[:4]]
    for left, _ in rows:
        if not isinstance(left, str):
            left_widths = [max(w, len(cell)) for w, cell in zip(left_widths, left, strict=True)]
    gaps = 2 * (len(left_widths) - 1)
    labels = [label for label, _ in spans] + [left for left, _ in rows if isinstance(left, str)]
    left_block = max(sum(left_widths) + gaps, *(len(label) for label in labels))
    left_widths[-1] += left_block - (sum(left_widths) + gaps)  # room for the longest span label
    right_widths = [len(h) for h in header[4:]]
    for _, numbers in [*rows, *spans]:
        right_widths = [max(w, len(cell)) for w, cell in zip(right_widths, numbers, strict=True)]

    def line(left: list[str] | str, numbers: list[str]) -> str:
        if not isinstance(left, str):
            left = "  ".join(cell.ljust(w) for cell, w in zip(left, left_widths, strict=True))
        right = "  ".join(cell.rjust(w) for cell, w in zip(numbers, right_widths, strict=True))
        return f"{left.ljust(left_block)}  {right}".rstrip()

    lines = [title, line(header[:4], header[4:])]
    lines.extend(line(left, numbers) for left, numbers in [*rows, *spans])
    details: list[str] = []
    for p in cost["pools"]:
        if p["kind"] == "autopilot-profile":
            per_pod = ", ".join(
                f"{_LABELS[c]} {v if isinstance(v, str) else f'${v}'}"
                for c, v in p["perPodHourAtLeast"].items()
            )
            details.append(
                f"{p['name']}: per GPU Pod-hour on {p['machineType'] or NA}: at least {per_pod} "
                "(its VM price; the Autopilot premium comes on top)"
            )
        details += [f"{p['name']}: {NA}: {why}" for why in _unique(p["reasons"].values())]
        details += [f"{p['name']}: {note}" for note in p["notes"]]
    details += [fee["note"], *cost["notes"]]
    for svc in cost.get("services") or []:
        details.append(
            f"model server {svc['name']} on {svc['pool']} ({_LABELS[svc['pricing']]}): "
            f"{_dollars(svc['replicaHourly'])}/h "
            + ("its prefill and decode replicas together" if svc.get("disaggregated") else "a replica")
            + f" ({svc['gpusPerReplica']} GPU(s)"
            + (
                f" on {svc['gpusPerReplica'] // svc['gpusPerNode']} nodes"
                if svc["gpusPerReplica"] > svc["gpusPerNode"]
                else ""
            )
            + "), "
            f"{_dollars(svc['hourlyAtMax'])}/h and {_dollars(svc['monthlyAtMax'])}/month at "
            f"{svc['replicas']} replica(s), whether it serves or not"
            + (f"; its weights: {svc['weightsVolume']}" if svc.get("weightsVolume") else "")
        )
    captured = cost["captured"] + (" or later" if cost.get("capturedIsLowerBound") else "")
    details.append(f"prices: {cost['source']}, captured {captured}")
    for text in details:
        lines.extend(textwrap.wrap(text, width=_WRAP, initial_indent="  - ", subsequent_indent="    "))
    return lines
