"""Prove that a program outside this repository can use the library and the plugin, as released.

    .venv/bin/python tools/consumer_check.py [--keep] [--no-plugin]

What it does, each step timed, everything in a temporary directory outside the repository:

1. `git clone` of this repository's HEAD (committed changes only), its `main` branch set to HEAD
   there: what a consumer's clone of the default branch holds once HEAD is merged.
2. A fresh venv (the running Python's `-m venv`, so the pip it bundles), and the install line of
   docs/library.md as written, `gke-gpu @ git+https://<your-git-host>/gke-gpu@main`, with the clone
   in place of the host (`gke-gpu @ git+file://localhost/<clone>@main`), constrained to the versions
   requirements.txt pins (its `-e .` line left out). `git+file:///...` (three slashes) is not used:
   pip 23.2 rejects it as an invalid requirement.
3. A consumer program, run from its own directory with `python -I` (so neither this repository
   nor PYTHONPATH is on sys.path), under the Pulumi SDK's mocks: it imports `gke_gpu` from the
   venv, declares `GpuNodePool` with the six required args and checks the NodePool's inputs (the
   machine type derived from the accelerator, the GPU taint, autoscaling), then checks that
   `gpus_per_node: 3` is refused with an InvalidArgsError naming the arg before any NodePool exists.
4. (unless --no-plugin) The plugin as `pulumi package add <git-url>/provider` would run
   it: `pip install -r requirements.txt` with the clone's provider/ as the working directory (as
   the Pulumi language host does), which must reinstall gke-gpu from the clone's root (its `..`;
   into the same venv, `--force-reinstall --no-deps`: the dependencies are those of step 2), then
   `python provider/ <engine address>` asked over gRPC for its version and schema, which must be
   the clone's provider/schema.json.

Not covered (needs the Pulumi CLI): `pulumi package add` itself, the SDKs it generates, and the
`pip install --upgrade pip setuptools wheel` the language host runs before the requirements.
Needs git and the package index (or a mirror: PIP_INDEX_URL); a warm pip cache makes it fast.
Exit status: 0 every check passed; 1 a check failed; 2 a Python without the project's virtualenv.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from tools.schema import plugin_schema
except ModuleNotFoundError as exc:  # not the project's virtualenv: say how to get it, no traceback
    from tools.venv_guard import exit_without_venv

    exit_without_venv(exc, __name__, "tools/consumer_check.py")

ROOT = Path(__file__).resolve().parent.parent

# The consumer program: standard library, pulumi and gke_gpu only.
CONSUMER = r"""
import json
import sys

import pulumi
from pulumi.runtime import Mocks, set_mocks, test


class Recorder(Mocks):
    def __init__(self):
        self.resources = []

    def new_resource(self, args):
        self.resources.append({"type": args.typ, "name": args.name, "inputs": args.inputs})
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        raise AssertionError(f"unexpected invoke {args.token}")


recorder = Recorder()
set_mocks(recorder, project="consumer", stack="check", preview=False)

import gke_gpu  # noqa: E402  (after set_mocks, as a test would)
from gke_gpu import GpuNodePool, InvalidArgsError  # noqa: E402

ARGS = {
    "project": "p-123456",
    "location": "us-central1",
    "cluster_name": "c",
    "accelerator": "nvidia-l4",
    "gpus_per_node": 1,
    "max_nodes": 2,
}


def node_pools():
    return [r for r in recorder.resources if r["type"] == "gcp:container/nodePool:NodePool"]


@test
def declare():
    pool = GpuNodePool("train", ARGS)
    return pool.urn.apply(lambda _: None)


refused = []


@test
def refuse():
    try:
        GpuNodePool("bad", {**ARGS, "gpus_per_node": 3})
    except InvalidArgsError as exc:
        refused.append(str(exc))
        return
    raise AssertionError("gpus_per_node: 3 was accepted for nvidia-l4")


declare()
pools = node_pools()
assert len(pools) == 1, pools
inputs = pools[0]["inputs"]
node = inputs["nodeConfig"]
accelerator = node["guestAccelerators"][0]
checks = {
    "imported from": gke_gpu.__file__,
    "version": gke_gpu.__version__,
    "cluster": inputs["cluster"],
    "machineType": node["machineType"],
    "accelerator": [accelerator["type"], int(accelerator["count"])],
    "taints": node["taints"],
    "autoscaling": inputs["autoscaling"],
}
assert gke_gpu.__file__.startswith(sys.prefix), "gke_gpu was not imported from the venv"
assert inputs["cluster"] == "c" and inputs["location"] == "us-central1" and inputs["project"] == "p-123456"
assert node["machineType"] == "g2-standard-8", node["machineType"]
assert accelerator["type"] == "nvidia-l4" and accelerator["count"] == 1, accelerator
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
assert GPU_TAINT in node["taints"], node["taints"]
assert inputs["autoscaling"]["totalMaxNodeCount"] == 2, inputs["autoscaling"]
assert inputs["autoscaling"].get("totalMinNodeCount", 0) == 0, inputs["autoscaling"]

refuse()
message = refused[0]
assert "gpus_per_node" in message, message
assert len(node_pools()) == 1, "a NodePool was declared for refused args"
checks["refused"] = message
print(json.dumps(checks, indent=2, default=str))
"""


# Where pip installed gke-gpu from (PEP 610's direct_url.json).
DIRECT_URL = (
    "import json, importlib.metadata as m; "
    "print(json.loads(m.distribution('gke-gpu').read_text('direct_url.json'))['url'])"
)


class CheckError(Exception):
    """A step failed; the message says which and why."""


class Steps:
    """Runs commands and times each step."""

    def __init__(self, cwd: Path) -> None:
        # Commands run outside the repository by default: from inside it, `python -c` would find
        # the repository's gke_gpu.egg-info (sys.path[0] is the working directory).
        self.cwd = cwd
        self.timings: list[tuple[str, float]] = []
        # Nothing from the caller's Python set-up leaks into the consumer's.
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
        }
        self.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    @contextmanager
    def step(self, name: str, title: str) -> Iterator[None]:
        print(f"-- {name}: {title}", flush=True)
        start = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - start
            self.timings.append((name, took))
            print(f"   {name}: {took:.1f} s", flush=True)

    def run(self, args: Sequence[str | Path], cwd: Path | None = None, quiet: bool = False) -> str:
        done = subprocess.run(
            [str(a) for a in args],
            cwd=cwd or self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise CheckError(
                f"{' '.join(map(str, args))} (in {cwd or self.cwd}) failed:\n{done.stdout}{done.stderr}"
            )
        if not quiet and done.stdout.strip():
            print("   " + done.stdout.strip().replace("\n", "\n   "), flush=True)
        return done.stdout


def constraints(requirements: Path, out: Path) -> Path:
    """requirements.txt as pip constraints: the pins, without `-e .` or other option lines."""
    lines = [
        line
        for line in requirements.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith(("-", "#"))
    ]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


# The install line of docs/library.md, which this check runs as written, the host and path of the
# repository (a placeholder there) replaced by the clone's.
LIBRARY_DOC = ROOT / "docs" / "library.md"
HOST_PLACEHOLDER = "https://<your-git-host>/gke-gpu"


def documented_requirement(doc: Path = LIBRARY_DOC) -> str:
    """The one `gke-gpu @ git+...` line of docs/library.md's Python section."""
    lines = [
        line.strip()
        for line in doc.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("gke-gpu @ git+")
    ]
    if len(lines) != 1 or f"git+{HOST_PLACEHOLDER}@" not in lines[0]:
        raise CheckError(
            f"{doc.name}: expected one `gke-gpu @ git+{HOST_PLACEHOLDER}@<ref>` line, found {lines}"
        )
    return lines[0]


def local_requirement(documented: str, clone: Path) -> str:
    """The documented line with the clone in place of the repository's host (`git+file:///...`, three
    slashes, is not used: pip 23.2 rejects it as an invalid requirement)."""
    return documented.replace(HOST_PLACEHOLDER, f"file://localhost{clone}")


def clone_as_main(steps: Steps, repo: Path, work: Path) -> tuple[Path, str]:
    """A clone of HEAD whose `main` is HEAD: what a consumer's clone of the repository's default
    branch holds once HEAD is merged (committed changes only)."""
    clone = work / "gke-gpu"
    steps.run(["git", "-c", f"safe.directory={repo}", "clone", "--quiet", repo, clone])
    with (clone / "pyproject.toml").open("rb") as f:
        version = str(tomllib.load(f)["project"]["version"])
    head = steps.run(["git", "-C", clone, "rev-parse", "HEAD"], quiet=True).strip()
    steps.run(["git", "-C", clone, "checkout", "--quiet", "-B", "main", head], quiet=True)
    print(f"   main = HEAD {head[:12]} (committed changes only)")
    return clone, version


def new_venv(steps: Steps, where: Path) -> Path:
    steps.run([sys.executable, "-m", "venv", where])
    python = where / "bin" / "python"
    steps.run([python, "-m", "pip", "--version"])
    return python


def check(repo: Path, keep: bool, plugin: bool) -> None:
    total = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="gke-gpu-consumer-")).resolve()
    steps = Steps(work)
    if work.is_relative_to(repo):
        raise CheckError(f"the temporary directory {work} is inside the repository")
    try:
        with steps.step("clone", f"{repo} into {work}"):
            clone, version = clone_as_main(steps, repo, work)
        pins = constraints(clone / "requirements.txt", work / "constraints.txt")

        with steps.step("install", "a fresh venv; pip install docs/library.md's line, from the clone"):
            python = new_venv(steps, work / "venv")
            requirement = local_requirement(documented_requirement(clone / "docs" / "library.md"), clone)
            print(f"   {requirement}")
            # --no-compile: pulumi_gcp's bytecode is most of an install's time; imports compile what they use.
            steps.run([python, "-m", "pip", "install", "-q", "--no-compile", requirement, "-c", pins])
            steps.run([python, "-m", "pip", "show", "gke-gpu"], quiet=True)

        with steps.step("consumer", "a program under mocks declares GpuNodePool with the six required args"):
            consumer = work / "consumer"
            consumer.mkdir()
            (consumer / "main.py").write_text(CONSUMER, encoding="utf-8")
            steps.run([python, "-I", "main.py"], cwd=consumer)

        if plugin:
            with steps.step("plugin install", "pip install -r requirements.txt in provider/"):
                reinstall = ["install", "-q", "--force-reinstall", "--no-deps", "-r", "requirements.txt"]
                steps.run([python, "-m", "pip", *reinstall], cwd=clone / "provider")
                source = steps.run([python, "-I", "-c", DIRECT_URL], quiet=True).strip()
                if source != clone.as_uri():
                    raise CheckError(
                        f"provider/requirements.txt installed gke-gpu from {source}, not {clone}"
                    )
                print(f"   gke-gpu installed from {source} (the clone's root)")
            with steps.step("plugin run", "python provider/ <engine>; GetPluginInfo and GetSchema over gRPC"):
                served_version, served = plugin_schema(python, clone / "provider")
                committed = json.loads((clone / "provider" / "schema.json").read_text(encoding="utf-8"))
                if served_version != version:
                    raise CheckError(f"the plugin reports version {served_version}, not {version}")
                if served != committed:
                    raise CheckError("the plugin's schema differs from provider/schema.json in the clone")
                count = len(served["resources"])
                print(f"   version {served_version}; schema = provider/schema.json ({count} components)")
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        print("timings: " + ", ".join(f"{name} {took:.1f} s" for name, took in steps.timings))
        print(f"total {time.monotonic() - total:.1f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--no-plugin", action="store_true", help="skip the plugin (step 4)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the repository to clone (this one)")
    args = parser.parse_args(argv)
    try:
        check(args.repo.resolve(), keep=args.keep, plugin=not args.no_plugin)
    except (CheckError, RuntimeError) as exc:
        print(f"consumer check FAILED: {exc}", file=sys.stderr)
        return 1
    print("consumer check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
