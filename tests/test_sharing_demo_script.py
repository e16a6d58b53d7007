"""The sharing demo's script, run the way its Pod runs it (`sh -c <script>`), against stand-ins for
vectorAdd and nvidia-smi: it passes only if every vectorAdd run passed, and it ends."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from gke_gpu.workloads.samples import SHARING_DEMO_SCRIPT


def _executable(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _start(tmp_path: Path, vector_add_body: str, seconds: str = "1") -> subprocess.Popen[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "nvidia-smi", 'echo "GPU 0: NVIDIA L4 (UUID: GPU-0000)"\n')
    vector_add = _executable(tmp_path / "vectorAdd", vector_add_body)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
        "VECTOR_ADD": str(vector_add),
        "SHARING_DEMO_SECONDS": seconds,
        "JOB_COMPLETION_INDEX": "3",
        "NODE_NAME": "gke-node-1",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
    }
    return subprocess.Popen(
        ["sh", "-c", SHARING_DEMO_SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _run(tmp_path: Path, vector_add_body: str, seconds: str = "1") -> subprocess.CompletedProcess[str]:
    return _finish(_start(tmp_path, vector_add_body, seconds))


# The two runs that last their whole window start together, so the file waits ~2 s for both, not 4.
# 2 s, not 1: the script's clock has whole seconds, so a 1 s window can close before the first run.
# The passing stand-in takes 0.05 s, as a kernel run takes time: an instant one had the script start
# processes back to back for the whole window (about one CPU core busy, beside the other tests).
PASSING_BODY = 'sleep 0.05\necho run >> "{count}"\necho "[Vector addition]"\necho "Test PASSED"\n'
SLOW_BODY = 'sleep 0.2\necho "Test PASSED"\n'


@pytest.fixture(scope="module")
def two_second_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, subprocess.Popen[str]]]:
    passing, slow = tmp_path_factory.mktemp("passing"), tmp_path_factory.mktemp("slow")
    started = {
        "passing": (passing, _start(passing, PASSING_BODY.format(count=passing / "count"), seconds="2")),
        "slow": (slow, _start(slow, SLOW_BODY, seconds="2")),
    }
    yield started
    for _, process in started.values():
        if process.poll() is None:
            process.kill()


def test_passes_when_every_run_passes(two_second_runs: dict[str, tuple[Path, subprocess.Popen[str]]]) -> None:
    tmp_path, process = two_second_runs["passing"]
    done = _finish(process)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "client 3 on node gke-node-1"
    assert "GPU 0: NVIDIA L4 (UUID: GPU-0000)" in lines, "prints the GPU it was given"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in lines, "prints the MPS limits it was given"
    runs = len((tmp_path / "count").read_text().splitlines())
    assert runs >= 1
    assert lines[-1] == f"PASS: client 3 ran vectorAdd {runs} times in 2 s on the shared GPU"
    # Clients that share a /tmp (four on one H200, 2026-11-25) failed while they shared one log:
    # each truncated the log another was about to read.
    assert (tmp_path / "vector-add-3.log").read_text().endswith("Test PASSED\n"), "one log per client"


@pytest.mark.parametrize(
    "vector_add_body",
    [
        'echo "Result verification failed at element 7!"\nexit 1\n',  # vectorAdd's own failure
        'echo "Test PASSED"\nexit 2\n',  # a CUDA error after the check
        "echo done\n",  # exit 0 without the sample's PASSED line
    ],
)
def test_fails_on_the_first_failed_run(tmp_path: Path, vector_add_body: str) -> None:
    done = _run(tmp_path, vector_add_body)
    assert done.returncode == 1
    assert "FAIL: client 3: vectorAdd run 1 failed:" in done.stdout
    assert "PASS" not in done.stdout.replace("Test PASSED", "")


def test_fails_when_nothing_ran(tmp_path: Path) -> None:
    done = _run(tmp_path, 'echo "Test PASSED"\n', seconds="0")
    assert done.returncode == 1
    assert "no vectorAdd run completed" in done.stdout


def test_ends_after_its_time(two_second_runs: dict[str, tuple[Path, subprocess.Popen[str]]]) -> None:
    """Bounded: a client keeps the GPU busy for SHARING_DEMO_SECONDS, then exits."""
    done = _finish(two_second_runs["slow"][1])
    assert done.returncode == 0, done.stdout + done.stderr
