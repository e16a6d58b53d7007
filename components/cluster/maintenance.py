"""When GKE may upgrade the cluster: its minimum version, a daily maintenance window, and maintenance
exclusions that hold minor or node upgrades back (a reserved training cluster must not be upgraded
under a run). The rules of the section model (`MaintenanceConfig`, cluster/model.py), for the
stack file and GkeCluster's args alike; pure (no cloud SDK: the stack layer stays light).
GkeCluster turns them into the provider's inputs with `cluster/gke_managed.py`.

Sources:

* cluster-toolkit @1047080 (2026-06-25) `modules/scheduler/gke-cluster/{main.tf, variables.tf}`: the
  training blueprints (`examples/gke-a3-ultragpu`, `examples/gke-a4`) set `min_master_version` from
  a version prefix, `release_channel: REGULAR`, a daily window (`maintenance_start_time`, default
  "09:00" GMT) and one exclusion `NO_MINOR_OR_NODE_UPGRADES` with `UNTIL_END_OF_SUPPORT`.
* terraform-provider-google-beta @93c65b2d (2026-08-21) `website/docs/r/container_cluster.html.markdown`:
  `maintenance_exclusion` (up to 20 at a time), `exclusion_options.scope` (NO_UPGRADES |
  NO_MINOR_UPGRADES | NO_MINOR_OR_NODE_UPGRADES), exactly one of `end_time` and
  `end_time_behavior: UNTIL_END_OF_SUPPORT`; times in RFC3339 "Zulu" form ("GKE may accept other
  formats, but will return values in UTC, causing a permanent diff", so they are sent in UTC).
  `resource_container_cluster.go`: `min_master_version` is an in-place update that upgrades the
  control plane only when it is newer than the running version (never a downgrade).
* GKE's "Maintenance windows and exclusions" pages: a window must leave at least 48 hours of
  maintenance in any 32 days (contiguous stretches of 4 hours or more count), which a daily window
  of GKE's chosen length does. A `NO_UPGRADES` exclusion lasts at most 30 days (the limit this module
  enforces; the stored copies read here did not show the sentence itself: UNVERIFIED against the
  page, widely documented); the minor scopes last until the end of the minor's support, which
  depends on the running version and is left to GKE.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..core.common import KeyNames, Problems, cut
from .model import MaintenanceConfig

MAX_NO_UPGRADES = timedelta(days=30)


def utc(timestamp: str) -> datetime | None:
    """An RFC3339 timestamp (the pattern already checked) as an aware UTC datetime, or None when the
    date itself does not exist (2026-02-30)."""
    try:
        return datetime.fromisoformat(timestamp).astimezone(UTC)
    except ValueError:
        return None


def zulu(timestamp: str) -> str:
    """The timestamp as GKE returns it (UTC, `Z`), so the next preview shows no change."""
    moment = utc(timestamp)
    assert moment is not None, "the maintenance rules refuse a date that does not exist"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def check_maintenance(names: KeyNames, problems: Problems, maintenance: MaintenanceConfig | None) -> None:
    """Each exclusion: one end (a time or the end of support), after its start, a unique name, and
    no longer than GKE allows for its scope."""
    if maintenance is None:
        return
    seen: dict[str, int] = {}
    for i, exclusion in enumerate(maintenance.exclusions):
        at = f"maintenance.exclusions[{i}]"
        if exclusion.name in seen:
            problems.add(
                names.at(f"{at}.name"),
                f"{cut(exclusion.name)} is already the name of exclusions[{seen[exclusion.name]}]; GKE "
                "keeps one exclusion per name",
            )
        seen.setdefault(exclusion.name, i)
        start = utc(exclusion.start)
        end = utc(exclusion.end) if exclusion.end else None
        for key, value, moment in (("start", exclusion.start, start), ("end", exclusion.end, end)):
            if value and moment is None:
                problems.add(names.at(f"{at}.{key}"), f"{cut(value)} is not a date that exists")
        ends = (
            f"an exclusion ends at a time ({names.key('end')}) or when its minor version's support ends "
            f"({names.key('until_end_of_support')}: true), exactly one of them"
        )
        if exclusion.end is None and not exclusion.until_end_of_support:
            problems.add(names.at(f"{at}.end"), f"missing; {ends}")
            continue
        if exclusion.end is not None and exclusion.until_end_of_support:
            problems.add(
                names.at(f"{at}.end"), f"not allowed with {names.key('until_end_of_support')}: true; {ends}"
            )
            continue
        if exclusion.until_end_of_support and exclusion.scope == "NO_UPGRADES":
            problems.add(
                names.at(f"{at}.until_end_of_support"),
                "not allowed with scope NO_UPGRADES, which lasts at most 30 days; use NO_MINOR_UPGRADES "
                "or NO_MINOR_OR_NODE_UPGRADES to hold a version until its end of support",
            )
        if start is None or end is None:
            continue
        if end <= start:
            problems.add(
                names.at(f"{at}.end"), f"{cut(exclusion.end or '')} is not after start {cut(exclusion.start)}"
            )
        elif exclusion.scope == "NO_UPGRADES" and end - start > MAX_NO_UPGRADES:
            days = (end - start) / timedelta(days=1)
            problems.add(
                names.at(f"{at}.end"),
                f"{cut(exclusion.end or '')} makes a NO_UPGRADES exclusion of {days:g} days; GKE allows "
                "at most 30 (security patches must reach the cluster); hold minor and node upgrades "
                "longer with scope NO_MINOR_OR_NODE_UPGRADES",
            )
