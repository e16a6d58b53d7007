"""The serving load test's judge (components/scripts/vllm_bench_judge.py) on real `vllm bench serve`
output published upstream."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "components" / "scripts" / "vllm_bench_judge.py"
_spec = importlib.util.spec_from_file_location("vllm_bench_judge", SCRIPT)
assert _spec is not None and _spec.loader is not None
judge_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = judge_module  # dataclasses look their module up there
_spec.loader.exec_module(judge_module)

# Verbatim from vLLM's documentation, "Benchmark CLI" > "Online Benchmark" (docs/benchmarking/cli.md
# at v0.33.0, https://github.com/vllm-project/vllm/blob/v0.33.0/docs/benchmarking/cli.md; Apache-2.0):
# `vllm bench serve` against `vllm serve NousResearch/Hermes-3-Llama-3.1-8B`, 10 ShareGPT prompts.
UPSTREAM = """\
============ Serving Benchmark Result ============
Successful requests:                     10
Benchmark duration (s):                  5.78
Total input tokens:                      1369
Total generated tokens:                  2212
Request throughput (req/s):              1.73
Output token throughput (tok/s):         382.89
Total token throughput (tok/s):          619.85
---------------Time to First Token----------------
Mean TTFT (ms):                          71.54
Median TTFT (ms):                        73.88
P99 TTFT (ms):                           79.49
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          7.91
Median TPOT (ms):                        7.96
P99 TPOT (ms):                           8.03
---------------Inter-token Latency----------------
Mean ITL (ms):                           7.74
Median ITL (ms):                         7.70
P99 ITL (ms):                            8.39
==================================================
"""
Floors = judge_module.Floors


def test_the_upstream_summary_is_read_figure_by_figure() -> None:
    figures = judge_module.parse(UPSTREAM)
    assert figures["successful"] == 10 and figures["duration_s"] == 5.78
    assert figures["output_tok_s"] == 382.89 and figures["request_throughput"] == 1.73
    assert (figures["mean_ttft_ms"], figures["p99_ttft_ms"]) == (71.54, 79.49)
    assert (figures["mean_tpot_ms"], figures["p99_itl_ms"]) == (7.91, 8.39)
    assert "failed" not in figures  # the docs' release printed no Failed requests line


def test_it_passes_floors_it_reaches_and_fails_one_it_misses() -> None:
    figures = judge_module.parse(UPSTREAM)
    passed, lines = judge_module.judge(figures, Floors(300, 100, 10))
    assert passed and all(line.startswith("ok") for line in lines)
    passed, lines = judge_module.judge(figures, Floors(500, 100, 10))
    assert not passed
    assert "FAIL output tok/s 382.89 (must be >= 500)" in lines


def test_a_failed_request_fails_the_run() -> None:
    # 0.33 adds `Failed requests:` after `Successful requests:` (vllm/benchmarks/serve.py).
    text = UPSTREAM.replace(
        "Successful requests:                     10\n",
        "Successful requests:                     8\nFailed requests:                         2\n",
    )
    passed, lines = judge_module.judge(judge_module.parse(text), Floors(1, 1000, 100))
    assert not passed and "FAIL failed requests 2 (must be == 0)" in lines


def test_older_and_newer_spellings_are_both_read() -> None:
    older = UPSTREAM.replace("Total token throughput", "Total Token throughput")
    assert judge_module.parse(older)["total_tok_s"] == 619.85


def run(text: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        input=text,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


@pytest.mark.parametrize(("floor", "code", "verdict"), [("300", 0, "PASS"), ("500", 1, "FAIL")])
def test_the_script_prints_the_output_then_its_verdict(floor: str, code: int, verdict: str) -> None:
    done = run(
        UPSTREAM,
        "--min-output-tok-s",
        floor,
        "--max-p99-ttft-ms",
        "100",
        "--max-mean-tpot-ms",
        "10",
        "--label",
        "c=4",
    )
    assert done.returncode == code, done.stderr
    assert done.stdout.startswith(UPSTREAM)
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"SERVING-LOAD RESULT {verdict} c=4: output 382.89 tok/s, 1.73 req/s")


def test_output_that_is_not_a_summary_is_an_error_not_a_pass() -> None:
    done = run(
        "Traceback (most recent call last):\n  ConnectionRefusedError\n",
        "--min-output-tok-s",
        "1",
        "--max-p99-ttft-ms",
        "1",
        "--max-mean-tpot-ms",
        "1",
    )
    assert done.returncode == 2
    assert "SERVING-LOAD RESULT ERROR" in done.stdout and "missing successful" in done.stdout
