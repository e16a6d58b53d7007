"""Judge the summary `vllm bench serve` prints against floors: PASS or FAIL, with every figure.

Runs in the serving load test's Pod (standard library only): `vllm bench serve ... | python3
vllm_bench_judge.py --min-output-tok-s 300 --max-p99-ttft-ms 2000 --max-mean-tpot-ms 60`. Exit 0 on
PASS, 1 on FAIL, 2 when the output is not a benchmark summary. The last line is always
`SERVING-LOAD RESULT ...`.

The summary's format (vLLM 0.33.0, vllm/benchmarks/serve.py): one `<label>: <value>` per line, the
label padded to 40 columns; older releases lack `Failed requests` and the `Peak ...` lines and spell
`Total Token throughput` with a capital T. Labels are matched without case or padding.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass

# Summary label (lower case, without the trailing colon) -> field.
_LABELS = {
    "successful requests": "successful",
    "failed requests": "failed",
    "maximum request concurrency": "max_concurrency",
    "benchmark duration (s)": "duration_s",
    "request throughput (req/s)": "request_throughput",
    "output token throughput (tok/s)": "output_tok_s",
    "total token throughput (tok/s)": "total_tok_s",
    "mean ttft (ms)": "mean_ttft_ms",
    "median ttft (ms)": "median_ttft_ms",
    "p99 ttft (ms)": "p99_ttft_ms",
    "mean tpot (ms)": "mean_tpot_ms",
    "p99 tpot (ms)": "p99_tpot_ms",
    "mean itl (ms)": "mean_itl_ms",
    "p99 itl (ms)": "p99_itl_ms",
}
REQUIRED = (
    "successful",
    "duration_s",
    "request_throughput",
    "output_tok_s",
    "mean_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
)
_LINE = re.compile(r"^\s*([A-Za-z0-9 ()/._-]+?)\s*:\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Floors:
    """What a run must reach: at least this output throughput, at most these latencies."""

    min_output_tok_s: float
    max_p99_ttft_ms: float
    max_mean_tpot_ms: float


def parse(text: str) -> dict[str, float]:
    """The summary's figures by field; raises ValueError naming what is missing."""
    figures: dict[str, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            field = _LABELS.get(match.group(1).strip().lower())
            if field is not None:
                figures[field] = float(match.group(2))
    missing = [f for f in REQUIRED if f not in figures]
    if missing:
        raise ValueError(f"not a `vllm bench serve` summary: missing {', '.join(missing)}")
    return figures


def judge(figures: dict[str, float], floors: Floors) -> tuple[bool, list[str]]:
    """PASS when every request succeeded and every floor holds; the reasons either way."""
    checks = [
        ("failed requests", figures.get("failed", 0.0), "==", 0.0),
        ("output tok/s", figures["output_tok_s"], ">=", floors.min_output_tok_s),
        ("p99 TTFT ms", figures["p99_ttft_ms"], "<=", floors.max_p99_ttft_ms),
        ("mean TPOT ms", figures["mean_tpot_ms"], "<=", floors.max_mean_tpot_ms),
    ]
    lines, passed = [], figures["successful"] > 0
    if not passed:
        lines.append("FAIL no successful request")
    for name, value, op, bound in checks:
        ok = {"==": value == bound, ">=": value >= bound, "<=": value <= bound}[op]
        passed = passed and ok
        lines.append(f"{'ok  ' if ok else 'FAIL'} {name} {value:g} (must be {op} {bound:g})")
    return passed, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-output-tok-s", type=float, required=True)
    parser.add_argument("--max-p99-ttft-ms", type=float, required=True)
    parser.add_argument("--max-mean-tpot-ms", type=float, required=True)
    parser.add_argument(
        "--label", default="", help="what was measured (concurrency, model), for the result line"
    )
    args = parser.parse_args(argv)
    text = sys.stdin.read()
    sys.stdout.write(text)
    try:
        figures = parse(text)
    except ValueError as exc:
        print(f"SERVING-LOAD RESULT ERROR {args.label}: {exc}".rstrip())
        return 2
    passed, lines = judge(figures, Floors(args.min_output_tok_s, args.max_p99_ttft_ms, args.max_mean_tpot_ms))
    for line in lines:
        print(line)
    summary = (
        f"output {figures['output_tok_s']:g} tok/s, {figures['request_throughput']:g} req/s, "
        f"TTFT mean {figures['mean_ttft_ms']:g} ms p99 {figures['p99_ttft_ms']:g} ms, "
        f"TPOT mean {figures['mean_tpot_ms']:g} ms"
    )
    print(f"SERVING-LOAD RESULT {'PASS' if passed else 'FAIL'} {args.label}: {summary}".replace("  ", " "))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
