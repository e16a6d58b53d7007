"""The offline render CLI: exit codes, tree, JSON, files, diff."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import stack_render
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


@pytest.fixture(autouse=True)
def _example_stacks_rendered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI renders with run_stack; for an example stack (the repository's Pulumi.<stack>.yaml, a
    preview) that render is stack_render's, made once per test process (the tests here render prod
    and dev over and over), a copy for each caller. Stack files elsewhere render as they are."""
    real = render.run_stack

    def run_stack(stack: str, *, preview: bool = True, directory: Path = ROOT):
        if preview and Path(directory) == ROOT:
            return stack_render(stack)
        return real(stack, preview=preview, directory=directory)

    monkeypatch.setattr(render, "run_stack", run_stack)


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
    """The real entry point, as a subprocess: exit 2 and one message for a bad stack, before the cloud
    SDKs are imported (the program refuses the stack file first; `-X importtime` lists every import)."""
    (tmp_path / "Pulumi.broken.yaml").write_text(INVALID_STACK)
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
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
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "import time:" in line}
    assert "pulumi" in imported, "the import list is read"
    assert not imported & {"pulumi_gcp", "pulumi_kubernetes"}


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


# -- warnings and the policy pack first ---------------------------------------------------------------

BUDGET_STACK = """\
config:
  gcp:project: test-project
  gcp:region: us-central1
  gke-gpu:cluster: {mode: standard, name: gpu-test, deletionProtection: false}
  gke-gpu:gpuPools:
    - {name: big, accelerator: nvidia-l4, gpusPerNode: 8, maxNodes: 9}
"""

NAT_WARNING_STACK = """\
config:
  gcp:project: test-project
  gcp:region: us-central1
  gke-gpu:cluster: {mode: standard, name: gpu-test, deletionProtection: false}
  gke-gpu:network:
    existing: {network: vpc, subnetwork: s, podsRangeName: p, servicesRangeName: v}
  gke-gpu:gpuPools:
    - {name: l4, accelerator: nvidia-l4, maxNodes: 1}
"""


def _stack(tmp_path: Path, name: str, text: str) -> list[str]:
    (tmp_path / f"Pulumi.{name}.yaml").write_text(text)
    return ["--stack", name, "--stack-dir", str(tmp_path)]


def test_program_warnings_are_captured_and_printed_before_the_tree() -> None:
    import pulumi

    from tools.offline import run_program
    from tools.plan import format_tree, to_document

    def program() -> dict:
        pulumi.log.warn("first thing to read")
        pulumi.log.info("worth knowing")
        return {"clusterMode": "existing"}

    result = run_program({}, program=program)
    # Each with the one prefix of its kind: a warning, and a note (info, as the engine shows it).
    assert result.warnings == ["warning: first thing to read", "note: worth knowing"]
    lines = format_tree(to_document(result)).splitlines()
    assert lines[0].startswith("stack test: ")
    assert lines[1:3] == ["warning: first thing to read", "note: worth knowing"]


def test_a_stack_with_warnings_shows_them_first(tmp_path: Path, capsys) -> None:
    assert render.main(_stack(tmp_path, "nat", NAT_WARNING_STACK)) == 0
    lines = capsys.readouterr().out.splitlines()
    warnings = [i for i, line in enumerate(lines) if line.startswith("warning: ")]
    assert warnings, "this stack has a warning (an existing subnet needs Cloud NAT)"
    tree = next(i for i, line in enumerate(lines) if line.startswith(("├─ ", "└─ ")))
    assert max(warnings) < tree
    policy = next(i for i, line in enumerate(lines) if line.startswith("policy check passed"))
    assert max(warnings) < policy < tree


def test_json_always_has_warnings_and_the_policy_verdict(capsys) -> None:
    assert render.main(["--stack", "dev", "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert isinstance(document["warnings"], list)
    assert document["warnings"] == [], "the dev stack has no warning"
    policy = document["policy"]
    assert (policy["checked"], policy["passed"], policy["mandatory"], policy["violations"]) == (
        True,
        True,
        0,
        [],
    )
    assert policy["pack"] == "gke-gpu-guardrails"
    assert captured.err.startswith("policy check passed: stack dev")


def test_a_mandatory_violation_is_printed_first_and_exits_3(tmp_path: Path, capsys) -> None:
    args = _stack(tmp_path, "budget", BUDGET_STACK)
    assert render.main(args) == render.EXIT_POLICY == 3
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[1].startswith("policy check FAILED: stack budget")
    assert lines[2].startswith("  - MANDATORY budget [pulumi:pulumi:Stack]: gpu-total-budget: ")
    assert "72 GPUs, over the budget of 64" in lines[2]
    assert "error: stack budget violates 1 mandatory policy(ies)" in captured.err

    out = tmp_path / "out"
    assert render.main([*args, "--json", "--out", str(out)]) == 3
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["policy"]["passed"] is False
    assert document["policy"]["violations"][0]["policy"] == "gpu-total-budget"
    assert "  - MANDATORY budget" in captured.err
    assert (out / "render.json").is_file(), "the render is still written for review"


def test_check_policies_reads_the_render_json_render_writes(tmp_path: Path) -> None:
    """.ci/run: `render.py --out build/render/<stack>` then `check_policies.py --render .../render.json`."""
    from tools import check_policies

    out = tmp_path / "budget-out"
    args = _stack(tmp_path, "budget", BUDGET_STACK)
    assert render.main([*args, "--out", str(out)]) == 3
    assert check_policies.main(["--render", str(out / "render.json")]) == 1
    assert render.main(["--stack", "dev", "--out", str(tmp_path / "dev")]) == 0
    assert check_policies.main(["--render", str(tmp_path / "dev" / "render.json")]) == 0


def test_without_pulumi_policy_the_render_says_the_check_was_skipped(monkeypatch, capsys) -> None:
    import tools

    monkeypatch.setitem(sys.modules, "pulumi_policy", None)  # import fails as if not installed
    monkeypatch.delitem(sys.modules, "tools.check_policies", raising=False)
    monkeypatch.delattr(tools, "check_policies", raising=False)
    assert render.main(["--stack", "dev"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The quick start's install has no policy pack: said as what it is, an optional check, not a fault.
    assert lines[1] == (
        "policy pack not run: the policy pack is an optional check that the dev install adds "
        "(`.venv/bin/pip install -r requirements-dev.txt`); `pulumi preview --policy-pack policy` runs it too"
    )
    assert not any(word in "\n".join(lines).lower() for word in ("missing", "skipped", "error"))


# -- --out ----------------------------------------------------------------------------------------------


def test_out_refuses_a_file(tmp_path: Path, capsys) -> None:
    target = tmp_path / "render.txt"
    target.write_text("mine")
    assert render.main(["--stack", "dev", "--out", str(target)]) == 2
    assert (
        capsys.readouterr().err
        == f"error: --out {target}: exists and is not a directory; give a directory to write into\n"
    )
    assert target.read_text() == "mine"


def test_out_refuses_a_directory_that_is_not_a_render(tmp_path: Path, capsys) -> None:
    (tmp_path / "dashboard.json").write_text("{}")
    assert render.main(["--stack", "dev", "--out", str(tmp_path)]) == 2
    assert "holds files but no earlier render" in capsys.readouterr().err
    assert (tmp_path / "dashboard.json").read_text() == "{}"
    assert not (tmp_path / "manifests").exists()


def test_out_replaces_an_earlier_render_without_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert render.main(["--stack", "prod", "--out", str(out)]) == 0
    assert (out / "dashboard.json").is_file()
    stale = out / "manifests" / "gpu-samples.job.gone.yaml"
    stale.write_text("kind: Job\n")
    (out / "notes.txt").write_text("kept")
    # onprem is a generic cluster: no dashboard, other manifests.
    assert render.main(["--stack", "onprem", "--out", str(out)]) == 0
    assert not (out / "dashboard.json").exists()
    assert not stale.exists()
    assert (out / "notes.txt").read_text() == "kept"
    manifests = {p.name for p in (out / "manifests").glob("*.yaml")}
    expected = {p.name for p in _fresh(tmp_path, "onprem")}
    assert manifests == expected
    assert json.loads((out / "render.json").read_text())["stack"] == "onprem"


def _fresh(tmp_path: Path, stack: str) -> list[Path]:
    fresh = tmp_path / f"fresh-{stack}"
    assert render.main(["--stack", stack, "--out", str(fresh)]) == 0
    return list((fresh / "manifests").glob("*.yaml"))


def test_manifests_keep_scripts_readable_as_literal_blocks(tmp_path: Path) -> None:
    script = (ROOT / "components" / "scripts" / "pytorch_smoke.py").read_text()
    assert render.main(["--stack", "prod", "--out", str(tmp_path)]) == 0
    path = tmp_path / "manifests" / "gpu-samples.configmap.pytorch-smoke-script.yaml"
    text = path.read_text()
    assert "\n  smoke.py: |\n" in text
    assert "\n    import torch\n" in text, "the script reads as code, one line per line"
    assert yaml.safe_load(text)["data"]["smoke.py"] == script


# -- samples and cost -------------------------------------------------------------------------------------


def test_the_tree_names_each_samples_pool_and_most_per_run(capsys) -> None:
    assert render.main(["--stack", "prod"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Sample workloads:") :]
    text = " ".join(line.strip() for line in section.splitlines())
    for name in ("nvidia-smi-l4-serving", "cuda-vector-add-l4-serving", "pytorch-smoke-l4-serving"):
        assert re.search(
            rf"{name} \(Job\): pool l4-serving, g2-standard-8 with 1 x nvidia-l4, on-demand: 1 node\(s\) at "
            r"\$\d+\.\d\d/h; at most \$\d+\.\d\d per run \(deadline \d+ (h|min)\)",
            text,
        ), name
    assert render.main(["--stack", "prod", "--json"]) == 0
    samples = json.loads(capsys.readouterr().out)["outputs"]["sampleWorkloads"]
    assert samples
    for name in samples:
        assert re.search(
            rf"{name} \((Job|Deployment)[^)]*\): pool \S+, .*?(at most \$|per run n/a: )", text
        ), name


# -- entry points outside the virtualenv ---------------------------------------------------------------


@pytest.mark.parametrize("tool", ["render.py", "check_policies.py", "golden.py", "benchmark.py"])
def test_a_python_without_the_venv_gets_the_command_to_make_one(tool: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-S", str(ROOT / "tools" / tool), "--stack", "dev"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "python3 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt" in proc.stderr
    assert f".venv/bin/python tools/{tool} --stack dev" in proc.stderr


def test_an_esc_environment_is_named_first_as_not_read_offline(tmp_path: Path, capsys) -> None:
    stack = "environment:\n  - my-project/gpu-env\n" + NAT_WARNING_STACK
    assert render.main(_stack(tmp_path, "esc", stack)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "warning: Pulumi.esc.yaml: `environment` (Pulumi ESC) is not read offline: "
        "its config is not in this render"
    )


def test_the_tree_shows_how_the_control_plane_is_reached() -> None:
    from tools import plan

    tree = plan.format_tree(plan.to_document(stack_render("prod")))
    expected = "ipEndpoint=private dnsEndpoint=google-cloud-only binaryAuthorization="
    assert f"{expected}PROJECT_SINGLETON_POLICY_ENFORCE" in tree
    tree = plan.format_tree(plan.to_document(stack_render("serve")))
    assert "dnsEndpoint=external" in tree


def test_a_stack_at_the_pool_limit_renders_in_bounded_time() -> None:
    """MAX_POOLS pools (and monitoring) render, and do not hang: a runner in which each registration
    ran inside the one before (an inline RPC executor, tried and reverted) ran out of stack at about
    70 pools and then waited forever."""
    from gke_gpu.core.common import MAX_POOLS
    from tests.conftest import render
    from tests.test_fuzz import no_hang
    from tools.benchmark import generated_stack

    config = generated_stack(MAX_POOLS)["config"]
    config["gke-gpu:monitoring"] = {"dcgm": "managed", "dashboard": True}
    with no_hang(60):
        result = render(config)
    assert len(result.of_type("gcp:container/nodePool:NodePool")) == MAX_POOLS + 1  # + the system pool


def test_every_kubernetes_object_of_a_fleet_gets_its_own_manifest(tmp_path: Path) -> None:
    # The manager and each worker declare objects of one namespace, kind and name through their own
    # providers: each must be written (checkov scans the manifests folder), none overwrite another.
    from tools import plan

    document = plan.to_document(stack_render("fleet"))
    objects = plan.kubernetes_objects(document)
    keys = [(o["metadata"].get("namespace"), o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(set(keys)) < len(keys), "the fleet has objects of one name on several clusters"
    written = plan.write_out(document, tmp_path / "out")
    manifests = [p for p in written if p.parent.name == plan.MANIFESTS]
    assert len(manifests) == len(objects) == len(set(manifests))
