#!/usr/bin/env python3
"""Benchmark: offline render time per stack, for generated 1- and 64-pool stacks, and over a floor.

    .venv/bin/python tools/benchmark.py [--repeat 3] [--floor STACK] [--floor-only] [--tests] [--tests-only]

Each fresh-process figure is the median of `--repeat` runs in a new Python process (what a user or
CI pays), as wall time and as the child's CPU time (user + sys, from getrusage: steadier than wall
time on a shared machine); the in-process figures are renders once imports are warm (what the test
suite pays per run). The per-pool cost is the slope between the generated 1-pool and 64-pool stacks,
(t64 - t1) / 63, which leaves out the fixed cost of a render.

The floor (`--floor`, prod by default) is `tools/floor_program.py`: a process that declares exactly
the resources a render of that stack declares (type tokens, names, parents, providers, inputs) through
the same SDK classes, under the same mocks, and prints them as JSON, with nothing else; the benchmark
checks that its declarations equal the render's, times both alternately and prints render / floor,
and names the imports only the render pays for (from one `-X importtime` run of each).
`--tests` also times the whole pytest suite once on 2 workers (`-n 2`, the suite's other options from
pyproject.toml), as wall time and as CPU time (user + sys of pytest and its workers; on a shared
machine the steadier of the two); `--tests-only` times only that. Nothing here asserts a time.

Bytecode: before timing, the repository's own modules (components/, tools/, policy/) are compiled to
their __pycache__, as pip compiles an installed package's at install time and as the SDKs' were; so
neither side pays for compiling source it would have cached. With PYTHONDONTWRITEBYTECODE set (as on
the machines that build this repository) nothing would ever cache them, and every fresh process would
compile the project's ~15k lines again. `--from-source` measures that way instead: it deletes the
repository's own __pycache__ folders (build output, ignored by git) and compiles nothing, so with
PYTHONDONTWRITEBYTECODE set every render compiles them; the SDKs' bytecode is read from their install
either way.
"""

from __future__ import annotations

import argparse
import compileall
import dataclasses
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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

GOAL = 1.05  # issue 38's target for render / floor (CPU time, whole process)

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


@dataclass(frozen=True)
class Timing:
    """Seconds of wall-clock and of CPU (user + sys) time."""

    wall: float
    cpu: float

    def __sub__(self, other: Timing) -> Timing:
        return Timing(self.wall - other.wall, self.cpu - other.cpu)

    def __truediv__(self, divisor: float) -> Timing:
        return Timing(self.wall / divisor, self.cpu / divisor)


def median(samples: list[Timing]) -> Timing:
    return Timing(statistics.median(s.wall for s in samples), statistics.median(s.cpu for s in samples))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_process(args: list[str], *, stderr: int = subprocess.DEVNULL) -> tuple[Timing, str]:
    """Run a command once (stdout discarded): its wall and CPU time, and its stderr if captured."""
    cpu, start = _children_cpu(), time.perf_counter()
    # Exit 3 (a mandatory policy violation: the generated 64-pool stack is over the pack's GPU
    # budget) still renders everything; only 1 (a bug) and 2 (invalid input) are failures here.
    done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT, text=True, check=False)
    timing = Timing(time.perf_counter() - start, _children_cpu() - cpu)
    if done.returncode not in (0, 3):
        raise SystemExit(f"benchmark: {' '.join(args)} exited {done.returncode}")
    return timing, done.stderr or ""


def time_process(args: list[str], repeat: int) -> Timing:
    return median([run_process(args)[0] for _ in range(repeat)])


def time_in_process(stack: str, directory: Path, repeat: int) -> tuple[Timing, int]:
    """The median warm render of a stack in this process, and how many custom resources it declares."""
    from tools.offline import run_stack

    run_stack(stack, directory=directory)  # warm imports and caches
    samples, count = [], 0
    for _ in range(repeat):
        cpu, start = time.process_time(), time.perf_counter()
        result = run_stack(stack, directory=directory)
        samples.append(Timing(time.perf_counter() - start, time.process_time() - cpu))
        assert result.error is None, result.error
        count = len([r for r in result.resources if r.custom])
    return median(samples), count


# --------------------------------------------------------------------------------------------------
# The floor: the same declarations on the bare SDKs.


def render_command(stack: str, directory: Path = ROOT) -> list[str]:
    """The real render, as a user runs it."""
    return [sys.executable, "tools/render.py", "--stack", stack, "--json", "--stack-dir", str(directory)]


def floor_command(spec: Path) -> list[str]:
    return [sys.executable, "tools/floor_program.py", str(spec)]


def write_spec(stack: str, path: Path, directory: Path = ROOT) -> int:
    """Render a stack in this process and write what it declared for the floor; the resource count."""
    from tools.offline import run_stack

    result = run_stack(stack, directory=directory)
    if result.error is not None:
        raise SystemExit(f"benchmark: stack {stack} does not render: {result.error}")
    resources = [dataclasses.asdict(r) for r in result.resources]
    path.write_text(json.dumps({"stack": stack, "resources": resources, "outputs": result.outputs}))
    return len(resources)


@dataclass
class FloorComparison:
    stack: str
    resources: int
    real_samples: list[Timing]
    floor_samples: list[Timing]
    # Self import time (seconds, from one `-X importtime` run of each) per module.
    real_imports: dict[str, float]
    floor_imports: dict[str, float]

    @property
    def real(self) -> Timing:
        return median(self.real_samples)

    @property
    def floor(self) -> Timing:
        return median(self.floor_samples)

    @property
    def ratio(self) -> Timing:
        """Of the medians."""
        return Timing(self.real.wall / self.floor.wall, self.real.cpu / self.floor.cpu)

    @property
    def best_ratio(self) -> float:
        """Of the least CPU times: what a machine nobody else uses would show, more nearly."""
        return min(s.cpu for s in self.real_samples) / min(s.cpu for s in self.floor_samples)

    def render_only_imports(self) -> list[tuple[str, float]]:
        """The modules the render imports and the floor does not, by top-level package (over 5 ms)."""
        extra: dict[str, float] = {}
        for module in self.real_imports.keys() - self.floor_imports.keys():
            parts = module.split(".")
            package = ".".join(parts[:2]) if parts[0] == "google" else parts[0]
            extra[package] = extra.get(package, 0.0) + self.real_imports[module]
        ranked = sorted(extra.items(), key=lambda item: item[1], reverse=True)
        return [(name, seconds) for name, seconds in ranked if seconds > 0.005]


def import_times(stderr: str) -> dict[str, float]:
    """`-X importtime` output as each module's self time in seconds."""
    times: dict[str, float] = {}
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            self_us, _, name = line.removeprefix("import time:").split("|")
            times[name.strip()] = int(self_us) / 1e6
    return times


OWN_TREES = ("components", "tools", "policy")


def prepare_bytecode(from_source: bool) -> str:
    """Compile the repository's modules to their __pycache__ (or delete those, `from_source`); say
    which in the report."""
    for tree in OWN_TREES:
        if from_source:
            for cache in (ROOT / tree).rglob("__pycache__"):
                shutil.rmtree(cache, ignore_errors=True)
        else:
            compileall.compile_dir(ROOT / tree, quiet=2)
    if from_source:
        return "(the repository's modules compiled from source in every process: --from-source)"
    return "(the repository's modules precompiled to bytecode first, as an installed package's are)"


def compare_with_floor(stack: str, repeat: int, workdir: Path) -> FloorComparison:
    spec = workdir / f"floor-{stack}.json"
    count = write_spec(stack, spec)
    verify = subprocess.run(
        [*floor_command(spec), "--verify"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if verify.returncode != 0:
        raise SystemExit(f"benchmark: the floor does not declare what {stack} does:\n{verify.stderr}")
    real_cmd, floor_cmd = render_command(stack), floor_command(spec)
    real, floor = [], []
    for _ in range(repeat):  # alternately, so a change in the machine's load hits both alike
        real.append(run_process(real_cmd)[0])
        floor.append(run_process(floor_cmd)[0])
    real_trace = run_process([sys.executable, "-X", "importtime", *real_cmd[1:]], stderr=subprocess.PIPE)[1]
    floor_trace = run_process([sys.executable, "-X", "importtime", *floor_cmd[1:]], stderr=subprocess.PIPE)[1]
    return FloorComparison(stack, count, real, floor, import_times(real_trace), import_times(floor_trace))


# --------------------------------------------------------------------------------------------------
# Report.

Row = tuple[str, Timing | None, str]


def _seconds(timing: Timing | None) -> tuple[str, str]:
    if timing is None:
        return "", ""
    return f"{timing.wall:.2f} s", f"{timing.cpu:.2f} s"


def _ms(timing: Timing) -> str:
    return f"{timing.wall * 1000:.1f} ms ({timing.cpu * 1000:.1f} ms cpu)"


def floor_rows(comparison: FloorComparison) -> list[Row]:
    ratio = comparison.ratio
    extra = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in comparison.render_only_imports())
    total = sum(comparison.real_imports.values()), sum(comparison.floor_imports.values())
    return [
        (f"render {comparison.stack} (alternating with its floor)", comparison.real, ""),
        (
            f"floor: {comparison.stack}'s {comparison.resources} declarations, bare SDKs",
            comparison.floor,
            f"imports {total[1]:.2f} s self (render: {total[0]:.2f} s)",
        ),
        (
            f"ratio render / floor (goal: at most {GOAL}x cpu)",
            None,
            f"{ratio.cpu:.2f}x cpu, {ratio.wall:.2f}x wall (least cpu: {comparison.best_ratio:.2f}x); "
            f"over the floor: {(comparison.real - comparison.floor).cpu:.2f} s cpu",
        ),
        ("imports only the render pays (self, -X importtime)", None, extra or "none over 5 ms"),
    ]


def print_table(rows: list[Row], repeat: int) -> None:
    width = max([len(r[0]) for r in rows] or [7])
    print(f"{'measure':<{width}}  {'wall':>7}  {'cpu':>7}  in process (warm) / notes")
    for label, timing, note in rows:
        wall, cpu = _seconds(timing)
        print(f"{label:<{width}}  {wall:>7}  {cpu:>7}  {note}".rstrip())
    python = sys.version.split()[0]
    print(f"(fresh process: median of {repeat}; cpu: the child's user + sys; Python {python})")
    if sys.dont_write_bytecode:  # every process compiles the repository's modules (and pytest's rewrites)
        print("(PYTHONDONTWRITEBYTECODE is set: no bytecode is cached, which every figure above pays)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--floor", metavar="STACK", default="prod", help="stack to set against its floor ('': none)"
    )
    parser.add_argument("--floor-only", action="store_true", help="only the floor comparison")
    parser.add_argument("--tests", action="store_true", help="also time the pytest suite once, on 2 workers")
    parser.add_argument("--tests-only", action="store_true", help="only time the pytest suite")
    parser.add_argument(
        "--from-source",
        action="store_true",
        help="delete the repository's __pycache__ instead of precompiling it (with PYTHONDONTWRITEBYTECODE)",
    )
    args = parser.parse_args(argv)
    python = sys.executable
    bytecode_note = prepare_bytecode(args.from_source)

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        if args.floor and not args.tests_only:
            rows += floor_rows(compare_with_floor(args.floor, args.repeat, directory))
        if not args.floor_only and not args.tests_only:
            rows += _sdk_rows(python, args.repeat) + _render_rows(directory, args.repeat)

    if args.tests or args.tests_only:
        rows.append(_suite_row(python))
    print_table(rows, args.repeat)
    print(bytecode_note)
    return 0


def _suite_row(python: str) -> Row:
    """The whole suite once on 2 workers: wall and CPU time (pytest and its workers), and its tally."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [python, "-m", "pytest", "-n", "2"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    timing = Timing(time.perf_counter() - start, _children_cpu() - cpu)
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    tally = (summary or ["no summary line"])[-1].strip("= ")
    if done.returncode != 0:
        tally = f"FAILED (exit {done.returncode}): {tally}"
    return ("pytest, whole suite on 2 workers (-n 2)", timing, tally)


def _sdk_rows(python: str, repeat: int) -> list[Row]:
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
    return [(label, time_process([python, "-c", code], repeat), "") for label, code in imports.items()]


def _render_rows(directory: Path, repeat: int) -> list[Row]:
    """Each stack (and the generated 64-pool one) fresh and warm; then the warm cost of a GPU pool."""
    rows: list[Row] = []
    for pools in (1, 64):
        (directory / f"Pulumi.bench{pools}.yaml").write_text(yaml.safe_dump(generated_stack(pools)))
    for stack, where in [(s, ROOT) for s in _stacks()] + [("bench64", directory)]:
        process = time_process(render_command(stack, where), repeat)
        warm, count = time_in_process(stack, where, repeat)
        label = "generated stack, 64 GPU pools" if stack == "bench64" else f"stack {stack}"
        rows.append((f"render {label}", process, f"{_ms(warm)}, {count} resources"))
    one, _ = time_in_process("bench1", directory, repeat)
    many, _ = time_in_process("bench64", directory, repeat)
    rows.append(("per GPU pool, warm: 64-pool render / 64", None, _ms(many / 64)))
    rows.append(
        (
            "per GPU pool, warm: slope (t64 - t1) / 63",
            None,
            f"{_ms((many - one) / 63)}; 1-pool render {_ms(one)}",
        )
    )
    return rows


def _stacks() -> list[str]:
    from tools.offline import stacks

    return stacks()


if __name__ == "__main__":
    sys.exit(main())
