"""The boot disk types of the system pool's machine series (data/boot_disks.yaml): N4, C4 and the
other Hyperdisk-only series take hyperdisk-balanced, the older ones Persistent Disk."""

from functools import cache

from ..core.common import cut, listing
from ..core.data import DATA_DIR, load_data

BOOT_DISKS_PATH = DATA_DIR / "boot_disks.yaml"
# Where the table has no row (a series it does not know): what the system pool always had.
FALLBACK_DISK_TYPE = "pd-balanced"


@cache
def series_boot_disks() -> dict[str, tuple[str, ...]]:
    """Machine series -> the boot disk types it takes, the default first."""
    raw = load_data(BOOT_DISKS_PATH)
    return {name: tuple(types) for name, types in raw["series"].items()}


def machine_series(machine_type: str) -> str:
    """The series of a machine type: `n4` of n4-standard-8, `n1` of custom-4-16384."""
    series = machine_type.split("-", 1)[0]
    return "n1" if series == "custom" else series


def system_disk_type(machine_type: str, disk_type: str | None) -> str:
    """The system pool's boot disk type: the one given, else its machine series' default."""
    if disk_type is not None:
        return disk_type
    allowed = series_boot_disks().get(machine_series(machine_type), ())
    return allowed[0] if allowed else FALLBACK_DISK_TYPE


def disk_type_problem(machine_type: str, disk_type: str | None) -> str | None:
    """Why the series of `machine_type` does not take `disk_type` as a boot disk, or None."""
    series = machine_series(machine_type)
    allowed = series_boot_disks().get(series)
    if disk_type is None or allowed is None or disk_type in allowed:
        return None
    return (
        f"{cut(disk_type)} is not a boot disk type of {series.upper()} machines ({machine_type}); "
        f"allowed: {listing(allowed)}"
    )
