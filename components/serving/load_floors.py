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

from typing import NamedTuple

REFERENCE_LEVELS = (1, 4, 16)


class LoadFloors(NamedTuple):
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


# A disaggregated service's load: llm-d v0.9.0's P/D guide's published run, THIRD-PARTY figures (llm-d/llm-d
# @1aecf03f guides/pd-disaggregation/README.md "Benchmarking", lines 413-629): gpt-oss-120b on 16 H200 GPUs
# of GKE A3 Ultra (DRANET RoCE), 8 prefill replicas of TP 1 and 2 decode of TP 4, vLLM v0.26.0; inputs of
# 5000 tokens and outputs of 250 at a constant 45 requests a second for 120 s. Its results: TTFT p99
# 2.0101 s, time per output token mean 0.005698 s, output 12,035.85 tokens a second; mean request latency
# 2.7755 s. Its inter-token latency percentiles are not a floor ("Chunked streaming delivers several
# tokens per event, so 95% of inter-token gaps measure below 1 ms"): the mean TPOT stands for them.
PD_GUIDE_FLOORS = LoadFloors(min_output_tok_s=12035.85, max_p99_ttft_ms=2010.1, max_mean_tpot_ms=5.698)
PD_GUIDE_INPUT_TOKENS, PD_GUIDE_OUTPUT_TOKENS = 5000, 250
# The load test's client sends about 1.3 tokens a word (scripts/serving_load.py): words for 5000 tokens.
PD_GUIDE_PROMPT_WORDS = round(PD_GUIDE_INPUT_TOKENS / 1.3)
# The guide's rate held 45 x 2.7755 s = 125 requests in flight on average (Little's law): the client,
# which keeps a fixed number in flight, judges that level; one request alone first.
PD_GUIDE_LEVELS = (1, 125)
PD_GUIDE = (
    "llm-d v0.9.0's P/D guide: gpt-oss-120b on 16 H200 (8 prefill TP1 + 2 decode TP4), 5000 "
    "input and 250 output tokens, 45 req/s"
)
