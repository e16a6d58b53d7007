#!/usr/bin/env python3
"""Benchmark: offline render time per stack and for a generated 64-pool stack, against import cost.

    .venv/bin/python tools/benchmark.py [--repeat 3] [--tests]

Each figure is the median of `--repeat` runs in a fresh Python process (what a user or CI pays),
plus the in-process render time once imports are warm (what the test suite pays per run). `--tests`
also times the whole pytest suite once. Nothing here asserts a time: it reports.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

try:
    import pulumi  # noqa: F401  (the render needs the venv's packages)
    import yaml
except ModuleNotFoundError as exc:  # not the project's virtualenv: say how to get it, no traceback
    from tools.venv_guard import exit_without_venv

    exit_without_venv(exc, __name__, "tools/benchmark.py")

# 64 valid Standard pools in us-central1, cycling through accelerators and options.
_POOL_SHAPES = [
    {"accelerator": "nvidia-l4", "gpusPerNode": 1},
    {"accelerator": "nvidia-l4", "gpusPerNode": 4, "spot": True},
    {
        "accelerator": "nvidia-tesla-t4",
        "gpusPerNode": 2,
        "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 4},
    },
    {"accelerator": "nvidia-tesla-a100", "gpusPerNode": 1, "migPartitionSize": "1g.5gb"},
    {"accelerator": "nvidia-a100-80gb", "gpusPerNode": 8},
    {"accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "reservation": {"type": "ANY"}},
    {"accelerator": "nvidia-h100-mega-80gb", "gpusPerNode": 8, "queuedProvisioning": True},
    {"accelerator": "nvidia-b200", "gpusPerNode": 8, "spot": True},
]


def generated_stack(pools: int) -> dict:
    return {
        "config": {
            "gcp:project": "bench-project",
            "gcp:region": "us-central1",
            "gke-gpu:cluster": {"mode": "standard", "name": "bench", "deletionProtection": False},
            "gke-gpu:gpuPools": [
                {"name": f"pool-{i:02d}", "maxNodes": 2, **_POOL_SHAPES[i % len(_POOL_SHAPES)]}
                for i in range(pools)
            ],
        }
    }


def _time_process(args: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        # Exit 3 (a mandatory policy violation: the generated 64-pool stack is over the pack's GPU
        # budget) still renders everything; only 1 (a bug) and 2 (invalid input) are failures here.
        done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        if done.returncode not in (0, 3):
            raise SystemExit(f"benchmark: {' '.join(args)} exited {done.returncode}")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _time_in_process(stack: str, directory: Path, repeat: int) -> tuple[float, int]:
    from tools.offline import run_stack

    run_stack(stack, directory=directory)  # warm imports and caches
    samples, count = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = run_stack(stack, directory=directory)
        samples.append(time.perf_counter() - start)
        assert result.error is None, result.error
        count = len([r for r in result.resources if r.custom])
    return statistics.median(samples), count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tests", action="store_true", help="also time the pytest suite once")
    args = parser.parse_args(argv)
    python = sys.executable

    rows: list[tuple[str, str, str]] = []
    imports = {
        "python startup": "pass",
        "import pulumi": "import pulumi",
        "import pulumi_gcp (container, compute, monitoring)": (
            "from pulumi_gcp import container, compute, monitoring; container.NodePool"
        ),
        "import pulumi_kubernetes (core, apps, batch)": (
            "import pulumi_kubernetes as k; k.core.v1.Namespace; k.apps.v1.DaemonSet; k.batch.v1.Job"
        ),
    }
    for label, code in imports.items():
        rows.append((label, f"{_time_process([python, '-c', code], args.repeat):.2f} s", ""))

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "Pulumi.bench64.yaml").write_text(yaml.safe_dump(generated_stack(64)))
        targets = [(s, ROOT) for s in _stacks()] + [("bench64", directory)]
        for stack, where in targets:
            cli = [python, "tools/render.py", "--stack", stack, "--json", "--stack-dir", str(where)]
            process = _time_process(cli, args.repeat)
            warm, count = _time_in_process(stack, where, args.repeat)
            label = "generated stack, 64 GPU pools" if stack == "bench64" else f"stack {stack}"
            rows.append(
                (f"render {label}", f"{process:.2f} s", f"{warm * 1000:.0f} ms warm, {count} resources")
            )

    if args.tests:
        start = time.perf_counter()
        subprocess.run([python, "-m", "pytest", "-q"], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        rows.append(("pytest (whole suite)", f"{time.perf_counter() - start:.1f} s", ""))

    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'fresh process':>13}  in process")
    for label, fresh, warm in rows:
        print(f"{label:<{width}}  {fresh:>13}  {warm}")
    print(f"(median of {args.repeat}; Python {sys.version.split()[0]})")
    return 0


def _stacks() -> list[str]:
    from tools.offline import stacks

    return stacks()


if __name__ == "__main__":
    sys.exit(main())
