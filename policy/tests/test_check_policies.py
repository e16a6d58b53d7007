"""tools/check_policies.py: the pack's rules over offline renders of the real stacks, and doctored ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from policy.gke_gpu_policies import rules
from tests.conftest import stack_render
from tools import check_policies, plan
from tools.offline import stacks

SAMPLE_JOB = "samples-nvidia-smi-l4-serving"


@pytest.fixture(scope="module")
def renders() -> dict[tuple[str, bool], dict[str, Any]]:
    """Every stack's render, as a preview and as an update (computed values as offline stand-ins)."""
    documents = {}
    for stack in stacks():
        for preview in (True, False):
            result = stack_render(stack, preview=preview)
            assert result.error is None, result.error
            documents[stack, preview] = plan.to_document(result)
    return documents


def resource(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in document["resources"] if r["name"] == name)


def found(violations: list[check_policies.Violation]) -> set[tuple[str, str]]:
    return {(v.policy, v.resource_name) for v in violations}


def test_the_stacks_are_dev_and_prod(renders: dict[tuple[str, bool], dict[str, Any]]) -> None:
    assert {"dev", "prod"} <= {stack for stack, _ in renders}


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "update"])
@pytest.mark.parametrize("stack", stacks())
def test_the_stacks_comply(
    renders: dict[tuple[str, bool], dict[str, Any]], stack: str, preview: bool
) -> None:
    notes: list[str] = []
    assert [str(v) for v in check_policies.check_document(renders[stack, preview], notes=notes)] == []
    assert notes == []


def test_prod_has_what_the_rules_look_at(renders: dict[tuple[str, bool], dict[str, Any]]) -> None:
    """Guard against a vacuous pass: prod has GPU pools, a cluster and GPU workloads."""
    document = renders["prod", False]
    types = [r["type"] for r in document["resources"]]
    assert types.count("gcp:container/nodePool:NodePool") >= 2
    assert "gcp:container/cluster:Cluster" in types
    assert any(rules.pod_spec_path(t) for t in types)
    # In an update the node service account's email is known, so that rule really ran.
    pool = resource(document, "gpu-l4-serving-pool")
    assert pool["inputs"]["nodeConfig"]["serviceAccount"].endswith(".iam.gserviceaccount.com")


def doctored(document: dict[str, Any]) -> dict[str, Any]:
    """prod with one violation of each rule."""
    document = copy.deepcopy(document)
    l4 = resource(document, "gpu-l4-serving-pool")["inputs"]
    l4["nodeConfig"]["taints"] = []
    l4["nodeConfig"]["spot"] = True
    l4["nodeConfig"]["serviceAccount"] = "default"
    l4["nodeConfig"]["workloadMetadataConfig"] = {"mode": "GCE_METADATA"}
    l4["autoscaling"] = {"totalMinNodeCount": 0, "totalMaxNodeCount": 40}
    l4["nodeConfig"]["guestAccelerators"][0]["count"] = 2  # 80 GPUs
    a100 = resource(document, "gpu-a100-mig-pool")["inputs"]
    a100["nodeConfig"]["spot"] = True
    del a100["nodeConfig"]["labels"]["gke-gpu/sharing-trusted"]
    del a100["autoscaling"]["totalMaxNodeCount"]
    a100["nodeConfig"]["shieldedInstanceConfig"]["enableSecureBoot"] = False
    resource(document, "gke-cluster")["inputs"]["deletionProtection"] = False
    job = resource(document, SAMPLE_JOB)["inputs"]["spec"]["template"]["spec"]
    job["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    job["tolerations"] = []
    return document


EXPECTED = {
    (rules.GPU_POOL_TAINT, "gpu-l4-serving-pool"),
    (rules.GPU_POOL_AUTOSCALING, "gpu-a100-mig-pool"),
    (rules.GPU_BUDGET, "prod"),
    (rules.PROD_NOT_ALL_SPOT, "prod"),
    (rules.PROD_DELETION_PROTECTION, "gke-cluster"),
    (rules.NODE_SERVICE_ACCOUNT, "gpu-l4-serving-pool"),
    (rules.NODE_WORKLOAD_IDENTITY, "gpu-l4-serving-pool"),
    (rules.NODE_SHIELDED, "gpu-a100-mig-pool"),
    (rules.WORKLOAD_GPU_LIMITS, SAMPLE_JOB),
    (rules.WORKLOAD_GPU_TOLERATION, SAMPLE_JOB),
    (rules.GPU_SHARING_TRUSTED, "gpu-a100-mig-pool"),
}


def test_a_doctored_document_violates_every_rule(renders: dict[tuple[str, bool], dict[str, Any]]) -> None:
    violations = check_policies.check_document(doctored(renders["prod", True]))
    assert found(violations) == EXPECTED
    assert len(violations) == len(EXPECTED)
    assert all(v.mandatory for v in violations)
    budget = next(v for v in violations if v.policy == rules.GPU_BUDGET)
    assert (budget.resource_type, budget.urn) == (check_policies.STACK_TYPE, None)
    assert "80 GPUs at least" in budget.message  # 40 x 2; the A100 pool has no max: not counted
    assert "not counted: gpu-a100-mig-pool (no known autoscaling maximum)" in budget.message
    taint = next(v for v in violations if v.policy == rules.GPU_POOL_TAINT)
    assert taint.urn == resource(renders["prod", True], "gpu-l4-serving-pool")["urn"]
    line = str(taint)
    assert line.startswith(f"gpu-l4-serving-pool [gcp:container/nodePool:NodePool]: {rules.GPU_POOL_TAINT}: ")


def test_unknowns_in_the_render_are_not_violations(renders: dict[tuple[str, bool], dict[str, Any]]) -> None:
    document = copy.deepcopy(renders["prod", True])
    pool = resource(document, "gpu-l4-serving-pool")["inputs"]
    assert pool["nodeConfig"]["serviceAccount"] == "(known after apply)"
    pool["nodeConfig"]["taints"] = "(known after apply)"
    pool["autoscaling"]["totalMaxNodeCount"] = "(known after apply)"
    resource(document, "gke-cluster")["inputs"]["deletionProtection"] = "(known after apply)"
    assert check_policies.check_document(document) == []


def test_config_sets_budget_and_enforcement(renders: dict[tuple[str, bool], dict[str, Any]]) -> None:
    prod = renders["prod", True]  # 4 L4 + 2 A100 GPUs
    tight = {rules.GPU_BUDGET: {"maxTotalGpus": 5}}
    assert found(check_policies.check_document(prod, tight)) == {(rules.GPU_BUDGET, "prod")}
    assert check_policies.check_document(prod, {rules.GPU_BUDGET: {"maxTotalGpus": 6}}) == []
    advisory = {rules.GPU_BUDGET: {"enforcementLevel": "advisory", "maxTotalGpus": 5}}
    [violation] = check_policies.check_document(prod, advisory)
    assert not violation.mandatory and str(violation).endswith("(advisory)")
    bad = doctored(prod)
    assert check_policies.check_document(bad, {"all": "disabled"}) == []
    only_taint = {"all": "disabled", rules.GPU_POOL_TAINT: "mandatory"}
    assert found(check_policies.check_document(bad, only_taint)) == {
        (rules.GPU_POOL_TAINT, "gpu-l4-serving-pool")
    }
    spot_ok = {rules.PROD_NOT_ALL_SPOT: {"allowAllSpot": True}}
    assert (rules.PROD_NOT_ALL_SPOT, "prod") not in found(check_policies.check_document(bad, spot_ok))


def test_the_example_config(renders: dict[tuple[str, bool], dict[str, Any]]) -> None:
    path = Path(rules.__file__).resolve().parent.parent / "config.example.json"
    config = check_policies.load_config(path)
    for policy in rules.POLICIES:  # it shows every config key, at its default
        schema = policy.config_schema.properties if policy.config_schema else {}
        assert {k: config[policy.name][k] for k in schema} == {k: v["default"] for k, v in schema.items()}
    assert check_policies.check_document(renders["prod", True], config) == []


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"no-such-policy": "mandatory"}, "unknown policy"),
        ({rules.GPU_BUDGET: {"maxGpus": 5}}, "unknown config key 'maxGpus'"),
        ({rules.GPU_BUDGET: {"maxTotalGpus": "5"}}, "expected integer"),
        ({rules.GPU_BUDGET: {"maxTotalGpus": -1}}, "below the minimum"),
        ({rules.PROD_NOT_ALL_SPOT: {"allowAllSpot": "yes"}}, "expected boolean"),
        ({rules.GPU_BUDGET: "strict"}, "enforcement level 'strict'"),
        ({"all": {"maxTotalGpus": 5}}, "'all' only takes"),
    ],
)
def test_invalid_config(config: dict[str, Any], error: str) -> None:
    with pytest.raises(check_policies.PolicyConfigError, match=error):
        check_policies.resolve_config(config)


# --------------------------------------------------------------------------------------------------
# The command line.


def test_cli_passes_for_prod(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_policies.main(["--stack", "prod"]) == check_policies.EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("policy check passed: stack prod,")
    assert "0 mandatory and 0 advisory" in out[0]


def test_cli_fails_on_a_doctored_render(
    renders: dict[tuple[str, bool], dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "render.json"
    path.write_text(plan.dumps(doctored(renders["prod", True])), encoding="utf-8")
    assert check_policies.main(["--render", str(path)]) == check_policies.EXIT_VIOLATIONS
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(EXPECTED) + 1
    assert out[-1].startswith("policy check FAILED: stack prod,") and f"{len(EXPECTED)} mandatory" in out[-1]
    assert f"{SAMPLE_JOB} [kubernetes:batch/v1:Job]: {rules.WORKLOAD_GPU_TOLERATION}: " in "\n".join(out)

    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"all": "advisory"}), encoding="utf-8")
    assert check_policies.main(["--render", str(path), "--config", str(config)]) == check_policies.EXIT_OK
    assert f"0 mandatory and {len(EXPECTED)} advisory" in capsys.readouterr().out


def test_cli_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_a_render = tmp_path / "x.json"
    not_a_render.write_text("{}", encoding="utf-8")
    assert check_policies.main(["--render", str(not_a_render)]) == check_policies.EXIT_INVALID
    assert check_policies.main(["--stack", "no-such-stack"]) == check_policies.EXIT_INVALID
    bad_config = tmp_path / "c.json"
    bad_config.write_text("[1]", encoding="utf-8")
    assert (
        check_policies.main(["--stack", "prod", "--config", str(bad_config)]) == check_policies.EXIT_INVALID
    )
    assert check_policies.main(["--stack", "prod", "--config", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "is not a render" in err and "no stack file" in err and "policy config" in err


# --------------------------------------------------------------------------------------------------
# The serve stack's model server (InferenceService) and the serving rules.

SERVER = "serve-chat-deployment"


def test_the_serve_stacks_server_is_judged_and_complies(
    renders: dict[tuple[str, bool], dict[str, Any]],
) -> None:
    from policy.gke_gpu_policies.servers import server_pods

    for preview in (True, False):
        document = renders["serve", preview]
        server = resource(document, SERVER)
        [pod] = server_pods(server["type"], server["name"], server["inputs"])  # not a vacuous pass
        weights = next(v for v in pod.pod["volumes"] if v["name"] == "weights")
        assert pod.servers and weights["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
        assert check_policies.check_document(document) == []


def test_a_doctored_serve_stack_violates_each_serving_rule(
    renders: dict[tuple[str, bool], dict[str, Any]],
) -> None:
    from policy.gke_gpu_policies import serving

    document = copy.deepcopy(renders["serve", True])
    pod = resource(document, SERVER)["inputs"]["spec"]["template"]["spec"]
    del pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    del pod["containers"][0]["volumeMounts"][-1]["readOnly"]
    resource(document, "gpu-l4-pool")["inputs"]["nodeConfig"]["taints"] = []
    violations = check_policies.check_document(document)
    assert found(violations) == {
        (serving.SERVING_GPU_LIMIT, SERVER),
        (serving.SERVING_ON_GPU_POOL, SERVER),
        (serving.SERVING_WEIGHTS_READ_ONLY, SERVER),
        # The same faults, as the general GPU rules see them.
        (rules.WORKLOAD_GPU_LIMITS, SERVER),
        (rules.GPU_POOL_TAINT, "gpu-l4-pool"),
    }
    on_pool = next(v for v in violations if v.policy == serving.SERVING_ON_GPU_POOL)
    assert on_pool.urn == resource(document, SERVER)["urn"]
    assert (
        "runs on node pool 'l4' (cloud.google.com/gke-nodepool), which has no nvidia.com/gpu"
        in on_pool.message
    )
