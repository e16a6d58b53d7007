"""The offline render CLI: exit codes, tree, JSON, files, diff."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tools import render
from tools.offline import ROOT

INVALID_STACK = """\
config:
  gcp:project: test-project
  gcp:region: us-central1
  gke-gpu:cluster: {mode: standard}
  gke-gpu:gpuPools:
    - {name: l4, accelerator: nvidia-l5, maxNodes: 1}
"""


def test_tree_for_the_dev_stack(capsys) -> None:
    assert render.main(["--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stack dev:")
    assert "gcp:container/cluster:Cluster" in out
    assert "mode=autopilot" in out
    assert "outputs:" in out


def test_json_is_a_render_document(capsys) -> None:
    assert render.main(["--stack", "prod", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["format"] == "gke-gpu-render/v1"
    assert document["stack"] == "prod"
    types = {r["type"] for r in document["resources"]}
    assert "gcp:container/nodePool:NodePool" in types
    pool = next(r for r in document["resources"] if r["type"] == "gcp:container/nodePool:NodePool")
    assert "nodeConfig.guestAccelerators" in pool["replaceOnChange"]


def test_invalid_stack_exits_2_with_the_key(tmp_path: Path, capsys) -> None:
    (tmp_path / "Pulumi.broken.yaml").write_text(INVALID_STACK)
    assert render.main(["--stack", "broken", "--stack-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "gke-gpu:gpuPools[0].accelerator: 'nvidia-l5'" in err


def test_unknown_stack_exits_2(capsys) -> None:
    assert render.main(["--stack", "nope"]) == 2
    assert "no stack file Pulumi.nope.yaml" in capsys.readouterr().err


def test_command_line_runs_without_cli_or_credentials(tmp_path: Path) -> None:
    """The real entry point, as a subprocess: exit 2 and one message for a bad stack."""
    (tmp_path / "Pulumi.broken.yaml").write_text(INVALID_STACK)
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "render.py"),
            "--stack",
            "broken",
            "--stack-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "nvidia-l5" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_diff_marks_replacements(tmp_path: Path, capsys) -> None:
    assert render.main(["--stack", "prod", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    pool = next(r for r in document["resources"] if r["name"] == "gpu-l4-serving-pool")
    pool["inputs"]["nodeConfig"]["spot"] = True  # as if the old render had Spot
    pool["inputs"]["autoscaling"]["totalMaxNodeCount"] = 9
    old = tmp_path / "old.json"
    old.write_text(json.dumps(document))
    assert render.main(["--stack", "prod", "--diff", str(old)]) == 0
    out = capsys.readouterr().out
    assert "! REPLACE gpu-l4-serving-pool" in out
    assert "nodeConfig.spot: true -> false  (forces replacement)" in out
    assert "autoscaling.totalMaxNodeCount: 9 -> 4\n" in out + "\n"


def test_diff_rejects_a_file_that_is_not_a_render(tmp_path: Path, capsys) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text(json.dumps({"resources": []}))
    assert render.main(["--stack", "dev", "--diff", str(bogus)]) == 2
    assert "is not a render" in capsys.readouterr().err
    text = tmp_path / "text.json"
    text.write_text("not json")
    assert render.main(["--stack", "dev", "--diff", str(text)]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_out_writes_manifests(tmp_path: Path) -> None:
    assert render.main(["--stack", "dev", "--out", str(tmp_path)]) == 0
    manifests = sorted((tmp_path / "manifests").glob("*.yaml"))
    assert manifests, "the dev stack declares Kubernetes objects"
    for path in manifests:
        obj = yaml.safe_load(path.read_text())
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]
    assert json.loads((tmp_path / "render.json").read_text())["stack"] == "dev"
