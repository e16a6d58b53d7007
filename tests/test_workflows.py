"""The GitHub Actions workflows: valid against GitHub's workflow schema, and keeping their guarantees.

Offline and fast: the schema is the copy vendored in check-jsonschema (`vendor.github-workflows`).
Each structural test names the guarantee it protects (docs/ci.md explains them); the workflows are
read as YAML 1.2, as GitHub reads them (so `on:` stays a string key).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from check_jsonschema.builtin_schemas import get_builtin_schema
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
PR = "pull-request.yml"
DEPLOY = "deploy.yml"
WORKFLOW_FILES = (PR, DEPLOY)

GCP_AUTH = "google-github-actions/auth"
SETUP_GCLOUD = "google-github-actions/setup-gcloud"
PULUMI_ACTION = "pulumi/actions"
CREDENTIALS_GUARD = "vars.GCP_WORKLOAD_IDENTITY_PROVIDER != ''"


@cache
def load(name: str) -> dict[str, Any]:
    yaml = YAML(typ="safe", pure=True)  # YAML 1.2: `on` is a string, not True
    document = yaml.load((WORKFLOWS / name).read_text())
    assert isinstance(document, dict), f"{name}: not a mapping"
    return document


def stacks() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))


def jobs(name: str) -> dict[str, dict[str, Any]]:
    return load(name)["jobs"]


def all_jobs() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name in WORKFLOW_FILES:
        for job_id, job in jobs(name).items():
            yield name, job_id, job


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job.get("steps", [])


def action(step: dict[str, Any]) -> str:
    """`owner/repo` of a step's `uses:` (without the ref), or '' for a `run:` step."""
    return step.get("uses", "").split("@", 1)[0]


def step_index(job: dict[str, Any], uses: str) -> list[int]:
    return [i for i, step in enumerate(steps(job)) if action(step) == uses]


def pulumi_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in steps(job) if action(s) == PULUMI_ACTION and s.get("with", {}).get("command")]


def runs(job: dict[str, Any]) -> str:
    return "\n".join(s.get("run", "") for s in steps(job))


def matrix_stacks(job: dict[str, Any]) -> list[str]:
    return sorted(job.get("strategy", {}).get("matrix", {}).get("stack", []))


def is_gcp_job(job: dict[str, Any]) -> bool:
    return bool(step_index(job, GCP_AUTH))


def comments_on_pr(job: dict[str, Any]) -> bool:
    return any(s.get("with", {}).get("comment-on-pr") is True for s in pulumi_steps(job))


# --------------------------------------------------------------------------------------------------
# Schema.


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_workflow_matches_github_workflow_schema(name: str) -> None:
    schema = get_builtin_schema("vendor.github-workflows")
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(load(name)), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{name}: {list(e.absolute_path)}: {e.message}" for e in errors)


def test_check_jsonschema_cli_accepts_the_workflows() -> None:
    """The reference validator (its YAML parser, regex engine and format checks), offline."""
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows"]
        + [str(WORKFLOWS / name) for name in WORKFLOW_FILES],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------------------------------
# Triggers and concurrency.


def test_pr_workflow_runs_on_pull_request_never_pull_request_target() -> None:
    """pull_request_target runs with the base repository's secrets: never for PR code."""
    triggers = load(PR)["on"]
    assert "pull_request" in triggers
    assert "pull_request_target" not in triggers


def test_pr_runs_one_at_a_time_per_pull_request() -> None:
    concurrency = load(PR)["concurrency"]
    assert concurrency["group"] == "pr-${{ github.event.pull_request.number }}"
    assert concurrency["cancel-in-progress"] is True


def test_deploy_triggers() -> None:
    """dev on pushes to main, prod on v* tags, either by hand."""
    triggers = load(DEPLOY)["on"]
    assert triggers["push"]["branches"] == ["main"]
    assert triggers["push"]["tags"] == ["v*"]
    options = triggers["workflow_dispatch"]["inputs"]["stack"]["options"]
    assert "prod" in options and "dev" in options
    unknown = set(options) - set(stacks())
    assert not unknown, f"workflow_dispatch offers stacks without a Pulumi.<stack>.yaml: {unknown}"
    chooser = runs(jobs(DEPLOY)["checks"])
    assert "push:refs/tags/v*) stack=prod" in chooser
    assert "push:refs/heads/main) stack=dev" in chooser


def test_a_stack_with_a_private_dns_endpoint_can_deploy_from_a_runner_inside_google_cloud() -> None:
    """prod's DNS endpoint answers only Google Cloud's networks (cluster.dnsEndpointExternal: false), so
    `pulumi up` from GitHub's runners cannot reach its cluster: the deploy job's runner is the repository
    variable DEPLOY_RUNNER where set (a self-hosted runner in the VPC), documented in docs/ci.md."""
    import yaml

    prod = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]["gke-gpu:cluster"]
    assert prod.get("dnsEndpointExternal") is False
    assert "vars.DEPLOY_RUNNER" in jobs(DEPLOY)["deploy"]["runs-on"]
    assert "`DEPLOY_RUNNER`" in (ROOT / "docs" / "ci.md").read_text()


def test_the_self_hosted_runner_only_from_the_protected_branch_and_tags() -> None:
    """The runner's label is chosen only for refs/heads/main and v* tags (GitHub's for any other ref),
    no other job names it, and docs/ci.md restricts its runner group to this workflow at those refs
    (a label alone is no boundary: any branch's workflow could name it)."""
    runs_on = " ".join(jobs(DEPLOY)["deploy"]["runs-on"].split())
    protected_refs = "(github.ref == 'refs/heads/main' || startsWith(github.ref, 'refs/tags/v'))"
    assert runs_on == f"${{{{ {protected_refs} && vars.DEPLOY_RUNNER || 'ubuntu-latest' }}}}"
    for name, job_id, job in all_jobs():
        if (name, job_id) != (DEPLOY, "deploy"):
            assert "DEPLOY_RUNNER" not in str(job.get("runs-on")), f"{name}: job {job_id}"
            assert job.get("runs-on") == "ubuntu-latest", f"{name}: job {job_id}"
    doc = " ".join((ROOT / "docs" / "ci.md").read_text().split())
    assert "Selected workflows" in doc
    assert "OWNER/REPO/.github/workflows/deploy.yml@refs/heads/main" in doc


def test_deploy_never_runs_twice_at_once_for_a_stack_and_never_cancels() -> None:
    workflow = load(DEPLOY)
    assert workflow.get("concurrency", {}).get("cancel-in-progress", False) is False
    command = "${{ needs.checks.outputs.command }}"
    up_jobs = [
        job
        for job in jobs(DEPLOY).values()
        if any(step["with"]["command"] == command for step in pulumi_steps(job))
    ]
    assert up_jobs, "deploy.yml runs no `pulumi up`"
    chooser = runs(jobs(DEPLOY)["checks"])
    assert "command=up\n" in chooser and 'command="$INPUT_COMMAND"' in chooser
    for job in up_jobs:
        concurrency = job["concurrency"]
        stack = "${{ needs.checks.outputs.stack }}"
        assert concurrency["group"] == f"deploy-{stack}"
        assert concurrency["cancel-in-progress"] is False
        assert job["environment"] == stack, "the environment (reviewers for prod) must follow the stack"
        (up,) = pulumi_steps(job)
        assert "needs.checks.outputs.stack" in up["with"]["stack-name"]


# --------------------------------------------------------------------------------------------------
# Permissions and credentials.


@pytest.mark.parametrize("name", WORKFLOW_FILES)
def test_workflow_default_permissions_are_none(name: str) -> None:
    assert load(name)["permissions"] == {}


def test_every_job_declares_least_permissions() -> None:
    for name, job_id, job in all_jobs():
        where = f"{name}: job {job_id}"
        permissions = job.get("permissions")
        assert isinstance(permissions, dict), f"{where}: explicit `permissions:` mapping required"
        for scope, level in permissions.items():
            assert level in ("read", "write", "none"), f"{where}: {scope}: {level}"
            if level != "write":
                continue
            if scope == "id-token":
                assert is_gcp_job(job), f"{where}: id-token: write without GCP authentication"
            elif scope == "pull-requests":
                assert comments_on_pr(job), f"{where}: pull-requests: write without a PR comment"
            else:
                pytest.fail(f"{where}: {scope}: write is not needed by any job here")
        if comments_on_pr(job):
            assert permissions.get("pull-requests") == "write", f"{where}: comments need pull-requests: write"


def test_id_token_write_only_and_always_on_jobs_that_authenticate_to_gcp() -> None:
    for name, job_id, job in all_jobs():
        has_id_token = job["permissions"].get("id-token") == "write"
        assert has_id_token == is_gcp_job(job), f"{name}: job {job_id}"


def test_gcp_auth_uses_workload_identity_federation_never_keys() -> None:
    auth_steps = 0
    for name, job_id, job in all_jobs():
        for step in steps(job):
            if action(step) != GCP_AUTH:
                continue
            auth_steps += 1
            inputs = step["with"]
            where = f"{name}: job {job_id}"
            assert "credentials_json" not in inputs, f"{where}: a service account key"
            provider = inputs.get("workload_identity_provider")
            assert provider == "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}", where
            account = str(inputs.get("service_account"))
            assert re.fullmatch(r"\$\{\{ vars\.GCP_\w+_SERVICE_ACCOUNT \}\}", account), where
    assert auth_steps == 2, "one auth step in preview, one in deploy"
    for name in WORKFLOW_FILES:
        text = (WORKFLOWS / name).read_text()
        for key_input in ("credentials_json", "service_account_key", "GOOGLE_CREDENTIALS"):
            assert key_input not in text, f"{name}: {key_input} (a long-lived key)"


PROVIDER_CHECK = 'grep -Eq \'^secretsprovider: *"?gcpkms://\' "Pulumi.$STACK.yaml"'


def test_no_preview_job_can_read_prods_secrets() -> None:
    """A pull request's preview (code any branch pusher writes) gets no environment, no passphrase, no
    deploy token and no protected stack; it checks that its stack's secrets use the stack's own Cloud
    KMS key (which the preview identity may decrypt for the non-prod stacks only: docs/ci.md). A
    protected stack's preview runs in deploy.yml, in the stack's environment."""
    text = (WORKFLOWS / PR).read_text()
    for job_id, job in jobs(PR).items():
        assert "environment" not in job, f"job {job_id}"
    assert "PULUMI_CONFIG_PASSPHRASE" not in text
    assert "secrets.PULUMI_ACCESS_TOKEN" not in text, "the deploy token is the environments'"
    preview = jobs(PR)["preview"]
    assert not set(matrix_stacks(preview)) & PROTECTED_STACKS
    (pulumi,) = pulumi_steps(preview)
    assert pulumi["env"] == {"PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_PREVIEW_ACCESS_TOKEN }}"}
    assert PROVIDER_CHECK in runs(preview)
    assert "PULUMI_CONFIG_PASSPHRASE" not in (WORKFLOWS / DEPLOY).read_text()
    deploy = jobs(DEPLOY)["deploy"]
    assert deploy["environment"] == "${{ needs.checks.outputs.stack }}"
    assert PROVIDER_CHECK in runs(deploy)
    doc = " ".join((ROOT / "docs" / "ci.md").read_text().split())
    assert "roles/cloudkms.cryptoKeyDecrypter" in doc and "--secrets-provider=gcpkms://" in doc


def test_deploy_and_preview_use_different_service_accounts() -> None:
    """PR code runs as the preview account; only environment-gated deploy jobs run as the deployer."""
    (preview_auth,) = (s for s in steps(jobs(PR)["preview"]) if action(s) == GCP_AUTH)
    (deploy_auth,) = (s for s in steps(jobs(DEPLOY)["deploy"]) if action(s) == GCP_AUTH)
    assert preview_auth["with"]["service_account"] == "${{ vars.GCP_PREVIEW_SERVICE_ACCOUNT }}"
    assert deploy_auth["with"]["service_account"] == "${{ vars.GCP_DEPLOY_SERVICE_ACCOUNT }}"
    assert "environment" in jobs(DEPLOY)["deploy"]


def test_cloud_jobs_run_only_where_credentials_are_configured() -> None:
    """Forks and unconfigured repositories skip the cloud jobs instead of failing them."""
    for name, job_id, job in all_jobs():
        if is_gcp_job(job):
            assert CREDENTIALS_GUARD in str(job.get("if", "")), f"{name}: job {job_id}"
    preview_guard = str(jobs(PR)["preview"].get("if", ""))
    assert "github.event.pull_request.head.repo.full_name == github.repository" in preview_guard
    assert "github.actor != 'dependabot[bot]'" in preview_guard


def test_cloud_job_step_order() -> None:
    """checkout before auth (credentials file in the workspace), auth before gcloud and Pulumi."""
    for name, job_id, job in all_jobs():
        if not is_gcp_job(job):
            continue
        where = f"{name}: job {job_id}"
        (checkout,) = step_index(job, "actions/checkout")
        (auth,) = step_index(job, GCP_AUTH)
        (gcloud,) = step_index(job, SETUP_GCLOUD)
        (pulumi,) = [i for i, s in enumerate(steps(job)) if s in pulumi_steps(job)]
        assert checkout < auth < gcloud < pulumi, where
        components = steps(job)[gcloud]["with"]["install_components"]
        assert "gke-gcloud-auth-plugin" in components.split(","), where


# --------------------------------------------------------------------------------------------------
# Actions pinned.

PINNED = re.compile(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}")
# The `uses:` line as written: the commit, and the release tag it is beside (GitHub's hardening guide,
# "Using third-party actions": a full-length commit SHA is the only immutable reference).
USES_LINE = re.compile(r"^\s*(- )?uses: (?P<uses>\S+) # (?P<tag>v\d+\.\d+\.\d+)(;.*)?$")


def test_every_action_is_pinned_by_commit_with_its_tag_beside_it() -> None:
    for name, job_id, job in all_jobs():
        for step in steps(job):
            uses = step.get("uses")
            if uses is None or uses.startswith("./"):
                continue
            if uses.startswith("docker://"):
                assert "@sha256:" in uses, f"{name}: job {job_id}: {uses}: pin images by digest"
                continue
            assert PINNED.fullmatch(uses), f"{name}: job {job_id}: {uses} is not pinned by a full commit SHA"
    for name in WORKFLOW_FILES:
        lines = [line for line in (WORKFLOWS / name).read_text().splitlines() if "uses:" in line]
        assert lines
        for line in lines:
            assert USES_LINE.match(line), f"{name}: {line.strip()}: no `# vX.Y.Z` beside the commit"


def test_one_action_one_commit() -> None:
    """Every step of one action names the same commit (and tag), so an update moves all of them."""
    seen: dict[str, str] = {}
    for name in WORKFLOW_FILES:
        for line in (WORKFLOWS / name).read_text().splitlines():
            found = USES_LINE.match(line)
            if found:
                action_name, ref = found["uses"].split("@")
                assert seen.setdefault(action_name, f"{ref} {found['tag']}") == f"{ref} {found['tag']}", line


# --------------------------------------------------------------------------------------------------
# Stacks, render, preview, policy pack.


# Stacks whose real preview cannot run on a GitHub-hosted runner: the on-prem cluster's API server
# is not reachable from there (preview it from a self-hosted runner; docs/ci.md). They are still
# rendered and policy-checked offline on every pull request.
OFFLINE_ONLY_STACKS = {"onprem"}
# Stacks previewed only in their GitHub environment (deploy.yml, command preview), never by a pull
# request: their state and secrets (prod's; the fleet's credentials to its workers) are not the pull
# request's to read.
PROTECTED_STACKS = {"prod", "fleet"}


def test_every_stack_is_previewed_and_rendered() -> None:
    expected = stacks()
    assert expected, "no Pulumi.<stack>.yaml found"
    preview, render = jobs(PR)["preview"], jobs(PR)["render"]
    assert matrix_stacks(preview) == sorted(set(expected) - OFFLINE_ONLY_STACKS - PROTECTED_STACKS), (
        "add the stack to the preview matrix in pull-request.yml (a protected one to deploy.yml's options)"
    )
    options = load(DEPLOY)["on"]["workflow_dispatch"]["inputs"]
    assert set(options["stack"]["options"]) >= PROTECTED_STACKS, "protected stacks' previews: deploy.yml"
    assert options["command"]["options"] == ["up", "preview"]
    assert matrix_stacks(render) == expected, "add the stack to the render matrix in pull-request.yml"
    render_runs = runs(render)
    assert (
        ".venv/bin/python tools/render.py --stack ${{ matrix.stack }} --out render-out/${{ matrix.stack }}"
    ) in render_runs
    (upload,) = (s for s in steps(render) if action(s) == "actions/upload-artifact")
    assert upload["with"]["name"] == "render-${{ matrix.stack }}"
    assert upload["with"]["path"] == "render-out/${{ matrix.stack }}"
    (pulumi,) = pulumi_steps(preview)
    assert "matrix.stack" in pulumi["with"]["stack-name"]


def test_pr_checks_run_ci_entry_point_without_credentials() -> None:
    checks = jobs(PR)["checks"]
    assert checks["permissions"] == {"contents": "read"}
    assert re.search(r"^\.ci/run$", runs(checks), re.MULTILINE)
    ci_run = ROOT / ".ci" / "run"
    if ci_run.is_file():  # the README's install-and-test command is in it
        text = ci_run.read_text()
        assert "-r requirements-dev.txt" in text and "-m pytest" in text
    assert "checks" in jobs(PR)["preview"]["needs"]


def test_preview_posts_a_pr_comment_per_stack_with_the_policy_pack() -> None:
    (step,) = pulumi_steps(jobs(PR)["preview"])
    inputs = step["with"]
    assert inputs["command"] == "preview"
    assert inputs["comment-on-pr"] is True
    assert inputs["edit-pr-comment"] is True
    assert inputs["always-include-summary"] is True
    assert inputs["github-token"] == "${{ secrets.GITHUB_TOKEN }}"
    assert inputs.get("policyPacks") == "policy", "the policy pack is enforced on preview"
    assert inputs["work-dir"] == "."


def test_deploy_runs_offline_checks_before_up_with_the_policy_pack() -> None:
    deploy_jobs = jobs(DEPLOY)
    deploy = deploy_jobs["deploy"]
    needs = deploy["needs"]
    needed = [needs] if isinstance(needs, str) else needs
    checks = "\n".join(runs(deploy_jobs[n]) for n in needed)
    assert re.search(r"^\.ci/run$", checks, re.MULTILINE), "tests, renders, policies, golden plans"
    assert "tools/render.py --stack ${{ steps.stack.outputs.stack }}" in checks
    assert "tools/check_policies.py --stack ${{ steps.stack.outputs.stack }}" in checks
    (up,) = pulumi_steps(deploy)
    assert up["with"]["command"] == "${{ needs.checks.outputs.command }}"  # up, or a dispatched preview
    assert up["with"].get("policyPacks") == "policy", "the policy pack is enforced on up"


def test_pulumi_jobs_install_the_program_and_the_policy_pack_first() -> None:
    """pulumi/actions installs no dependencies; the policy pack's must be there too."""
    for name, job_id, job in all_jobs():
        for step in pulumi_steps(job):
            before = runs({"steps": steps(job)[: steps(job).index(step)]})
            assert ".venv/bin/pip install -r requirements.txt -r policy/requirements.txt" in before, (
                f"{name}: job {job_id}"
            )


def test_pulumi_cli_matches_the_sdk_pin() -> None:
    """The CLI the action installs is the release of the pulumi SDK in requirements.txt."""
    pin = re.search(r"^pulumi==(\S+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert pin, "requirements.txt pins no pulumi version"
    for name, job_id, job in all_jobs():
        for step in pulumi_steps(job):
            assert str(step["with"]["pulumi-version"]) == pin.group(1), f"{name}: job {job_id}"


def test_python_setup_matches_the_project() -> None:
    """Python 3.11 (pyproject's target) and a pip cache keyed on the requirements files."""
    for name, job_id, job in all_jobs():
        for i in step_index(job, "actions/setup-python"):
            inputs = steps(job)[i]["with"]
            assert inputs["python-version"] == "3.11", f"{name}: job {job_id}"
            assert inputs["cache"] == "pip", f"{name}: job {job_id}"
            assert "requirements*.txt" in inputs["cache-dependency-path"], f"{name}: job {job_id}"


# --------------------------------------------------------------------------------------------------
# The workflows and the rest of the repository.


def test_docs_name_every_variable_and_secret_the_workflows_use() -> None:
    doc = (ROOT / "docs" / "ci.md").read_text()
    used: set[str] = set()
    for name in WORKFLOW_FILES:
        used |= set(re.findall(r"\b(?:vars|secrets)\.(\w+)", (WORKFLOWS / name).read_text()))
    used.discard("GITHUB_TOKEN")
    missing = sorted(n for n in used if f"`{n}`" not in doc)
    assert not missing, f"docs/ci.md does not document {missing}"


def test_files_the_workflows_run_exist() -> None:
    for path in ("requirements.txt", "requirements-dev.txt", "tools/render.py", "Pulumi.yaml"):
        assert (ROOT / path).is_file(), path


def test_files_being_written_elsewhere_exist_when_ci_runs() -> None:
    """`.ci/run` (executable), the policy check and the policy pack's requirements."""
    pending = [
        p
        for p in (".ci/run", "tools/check_policies.py", "policy/requirements.txt")
        if not (ROOT / p).is_file()
    ]
    if (ROOT / ".ci/run").is_file():
        assert os.access(ROOT / ".ci/run", os.X_OK), ".ci/run must be executable (git mode 100755)"
    if pending:
        pytest.skip(f"not in the repository yet: {', '.join(pending)}")


def test_policy_pack_uses_the_virtualenv_the_workflows_install_into() -> None:
    policy_project = ROOT / "policy" / "PulumiPolicy.yaml"
    if not policy_project.is_file():
        pytest.skip("policy/PulumiPolicy.yaml not in the repository yet")
    runtime = YAML(typ="safe", pure=True).load(policy_project.read_text()).get("runtime")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    virtualenv = options.get("virtualenv")
    assert virtualenv, "PulumiPolicy.yaml names no virtualenv; the workflows install into .venv"
    assert (policy_project.parent / virtualenv).resolve() == (ROOT / ".venv").resolve(), virtualenv
