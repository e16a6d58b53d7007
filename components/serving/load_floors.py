"""The serving load test's floors per GPU type: what a healthy server should at least reach.

ESTIMATES, not published figures (docs/serving-research.md 3c found none that fit: partial, secondary or
for other servers). They are derived from each GPU's memory bandwidth for the load test's reference
load (concurrency 16, ~260-token prompts, 128 output tokens) and a model of up to 8B parameters in 16
bits on one GPU (up to 3B on a T4's 16 GB): a decode step reads every weight once, so a step takes
about weights / bandwidth, and 16 streams share it. Each floor is about half of that bound, each
latency ceiling about twice it: they catch a server that is broken, misplaced or starved (a wrong
driver, a CPU fallback, a throttled GPU, a queue that never drains), not a slow model. Measure your own
and set `floors` in the stack file.
"""

from __future__ import annotations

from dataclasses import dataclass

REFERENCE_LEVELS = (1, 4, 16)


@dataclass(frozen=True)
class LoadFloors:
    """At the reference load: output tokens a second at least, P99 time to first token and mean time
    per output token at most."""

    min_output_tok_s: float
    max_p99_ttft_ms: float
    max_mean_tpot_ms: float


# GPU (catalog name) -> floors. HBM/GDDR bandwidth, from NVIDIA's datasheets: T4 320 GB/s, L4 300 GB/s,
# A100 40GB 1.6 TB/s, A100 80GB 2.0 TB/s, H100 SXM 3.35 TB/s, H200 4.8 TB/s, B200/GB200 8 TB/s,
# RTX PRO 6000 Blackwell 1.6 TB/s; GB300 8 TB/s (Compute Engine "GPU machine types": 279 GB HBM3e @ 8 TBps).
FLOORS: dict[str, LoadFloors] = {
    "nvidia-tesla-t4": LoadFloors(100, 8000, 150),
    "nvidia-l4": LoadFloors(120, 6000, 130),
    "nvidia-tesla-a100": LoadFloors(500, 2000, 35),
    "nvidia-a100-80gb": LoadFloors(600, 1500, 30),
    "nvidia-h100-80gb": LoadFloors(1000, 1000, 20),
    "nvidia-h100-mega-80gb": LoadFloors(1000, 1000, 20),
    "nvidia-h200-141gb": LoadFloors(1200, 1000, 18),
    "nvidia-b200": LoadFloors(1500, 800, 15),
    "nvidia-gb200": LoadFloors(1500, 800, 15),
    "nvidia-gb300": LoadFloors(1500, 800, 15),
    "nvidia-rtx-pro-6000": LoadFloors(500, 2000, 35),
}
# A GPU this table does not know (a new catalog entry): the slowest supported GPU's floors.
FALLBACK = FLOORS["nvidia-tesla-t4"]
# MIG: a partition's share of the GPU is its compute slices out of 7 (`<n>g.<memory>gb`).
MIG_SLICES = 7


def default_floors(accelerator: str, mig_partition_size: str | None = None) -> LoadFloors:
    """The estimated floors of one GPU, or of one MIG partition of it (scaled by its compute slices)."""
    floors = FLOORS.get(accelerator, FALLBACK)
    if not mig_partition_size:
        return floors
    slices = int(mig_partition_size.split("g.", 1)[0])
    share = slices / MIG_SLICES
    return LoadFloors(
        round(floors.min_output_tok_s * share, 1),
        round(floors.max_p99_ttft_ms / share),
        round(floors.max_mean_tpot_ms / share, 1),
    )
