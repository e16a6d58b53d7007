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


def _run(tmp_path: Path, vector_add_body: str, seconds: str = "1") -> subprocess.CompletedProcess[str]:
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
    return subprocess.run(
        ["sh", "-c", SHARING_DEMO_SCRIPT], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_passes_when_every_run_passes(tmp_path: Path) -> None:
    count = tmp_path / "count"
    # 2 s, not 1: the script's clock has whole seconds, so a 1 s window can close before the first run.
    done = _run(
        tmp_path, f'echo run >> "{count}"\necho "[Vector addition]"\necho "Test PASSED"\n', seconds="2"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "client 3 on node gke-node-1"
    assert "GPU 0: NVIDIA L4 (UUID: GPU-0000)" in lines, "prints the GPU it was given"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in lines, "prints the MPS limits it was given"
    runs = len(count.read_text().splitlines())
    assert runs >= 1
    assert lines[-1] == f"PASS: client 3 ran vectorAdd {runs} times in 2 s on the shared GPU"


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


def test_ends_after_its_time(tmp_path: Path) -> None:
    """Bounded: a client keeps the GPU busy for SHARING_DEMO_SECONDS, then exits."""
    done = _run(tmp_path, 'sleep 0.2\necho "Test PASSED"\n', seconds="2")
    assert done.returncode == 0, done.stdout + done.stderr
