"""The capacity ladder (issue 17): a Standard GPU pool whose nodes come from a custom ComputeClass that
tries a reservation, on-demand, flex-start and Spot in the order listed."""

import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpu.capacity_ladder import GpuCapacityLadder
from gke_gpu.gpu.node_pool import GpuNodePool
from tests.conftest import AUTOPILOT_CLUSTER, STANDARD_CLUSTER, config_error, render, stack_config
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

ZONAL = {**STANDARD_CLUSTER, "location": "us-central1-a"}
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
LADDER = {
    "name": "h100",
    "accelerator": "nvidia-h100-80gb",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "capacityLadder": ["reservation", "onDemand", "flexStart", "spot"],
    "reservation": {"type": "SPECIFIC", "name": "h100-res"},
    "maxRunDuration": "24h",
}


@pytest.fixture(scope="module")
def ladder() -> RunResult:
    return render(
        stack_config(
            cluster=ZONAL,
            gpuPools=[LADDER],
            workloads=[{"name": "nvidia-smi", "pool": "h100"}],
            batch={"kueue": True},
        )
    )


def test_the_steps_become_compute_class_priorities_in_order(ladder: RunResult) -> None:
    spec = ladder.one(COMPUTE_CLASS).inputs["spec"]
    rules = spec["priorities"]
    assert [r["machineType"] for r in rules] == ["a3-highgpu-8g"] * 4
    assert all(
        r["gpu"] == {"type": "nvidia-h100-80gb", "count": 8, "driverVersion": "default"} for r in rules
    )
    assert rules[0]["reservations"] == {
        "affinity": "Specific",
        "specific": [{"name": "h100-res", "project": "test-project"}],
    }
    assert not {"reservations", "spot", "flexStart"} & set(rules[1])  # on-demand: a plain rule
    assert rules[2]["flexStart"] == {"enabled": True} and rules[2]["maxRunDurationSeconds"] == 86400
    assert rules[3]["spot"] is True
    # a3-highgpu-8g comes with 16 Local SSDs: GKE's reference requires the count in the rule.
    assert all(r["storage"]["localSSDCount"] == 16 for r in rules)
    assert spec["nodePoolAutoCreation"] == {"enabled": True}
    assert spec["whenUnsatisfiable"] == "DoNotScaleUp"
    assert spec["priorityDefaults"] == {"location": {"zones": ["us-central1-a"]}}
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in spec["nodePoolConfig"][
        "taints"
    ]
    assert "serviceAccount" in spec["nodePoolConfig"]  # the cluster's least-privilege node account
    validate(ladder.one(COMPUTE_CLASS).inputs)


def test_no_node_pool_is_declared_for_a_ladder_pool(ladder: RunResult) -> None:
    assert ladder.of_type("gcp:container/nodePool:NodePool") == [
        r for r in ladder.of_type("gcp:container/nodePool:NodePool") if r.name.startswith("gke-")
    ]


def test_workloads_and_kueue_select_the_compute_class(ladder: RunResult) -> None:
    job = next(r for r in ladder.of_type("kubernetes:batch/v1:Job")).inputs["spec"]["template"]["spec"]
    assert job["nodeSelector"] == {"cloud.google.com/compute-class": "gpu-h100"}
    assert {
        "key": "cloud.google.com/compute-class",
        "operator": "Equal",
        "value": "gpu-h100",
        "effect": "NoSchedule",
    } in job["tolerations"]
    flavor = ladder.one("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor").inputs["spec"]
    assert flavor["nodeLabels"] == {"cloud.google.com/compute-class": "gpu-h100"}
    (pool,) = ladder.outputs["gpuPools"]
    assert pool["kind"] == "capacity-ladder"
    assert pool["capacityLadder"] == ["reservation", "onDemand", "flexStart", "spot"]


def test_the_render_says_max_nodes_is_not_a_limit_of_the_compute_class(ladder: RunResult) -> None:
    notes = [w for w in ladder.warnings if "capacityLadder" in w]
    assert any("a ComputeClass has no node limit" in note for note in notes), notes
    assert any("needs GKE 1.33.3-gke.1136000 or later" in note for note in notes), notes


def test_a_minimum_version_below_the_ladders_gate_is_refused() -> None:
    problems = config_error(
        {
            "cluster": {**ZONAL, "minimumVersion": "1.33.2-gke.1000000"},
            "gpuPools": [LADDER],
        }
    )
    assert "gke-gpu:gpuPools[0].capacityLadder: the ladder's node pools" in problems
    assert "needs GKE 1.33.3-gke.1136000 or later, but gke-gpu:cluster.minimumVersion is" in problems


def test_a_shared_reservation_names_its_project() -> None:
    pool = {**LADDER, "reservation": {"type": "SPECIFIC", "name": "projects/shared-res/reservations/h100"}}
    result = render(stack_config(cluster=ZONAL, gpuPools=[pool]))
    (rule, *_) = result.one(COMPUTE_CLASS).inputs["spec"]["priorities"]
    assert rule["reservations"]["specific"] == [{"name": "h100", "project": "shared-res"}]


@pytest.mark.parametrize(
    ("pool", "cluster", "expected"),
    [
        (
            {
                "name": "gb",
                "accelerator": "nvidia-gb200",
                "maxNodes": 1,
                "capacityLadder": ["onDemand", "spot"],
            },
            ZONAL,
            "gke-gpu:gpuPools[0].capacityLadder[1]: spot is not allowed: nvidia-gb200 machine types are not "
            "sold as Spot VMs",
        ),
        (
            {"name": "gb", "accelerator": "nvidia-gb200", "maxNodes": 1, "capacityLadder": ["flexStart"]},
            ZONAL,
            "gke-gpu:gpuPools[0].capacityLadder[0]: flexStart is not allowed: nvidia-gb200 machine types are "
            "not offered as flex-start VMs",
        ),
        (
            {"name": "l4", "accelerator": "nvidia-l4", "capacityLadder": ["flexStart", "spot"]},
            AUTOPILOT_CLUSTER,
            "gke-gpu:gpuPools[0].capacityLadder: not allowed on Autopilot",
        ),
        (
            {**LADDER, "reservation": {"type": "NONE"}},
            ZONAL,
            "gke-gpu:gpuPools[0].capacityLadder[0]: reservation needs the pool's reservation",
        ),
        (
            {**LADDER, "capacityLadder": ["onDemand", "spot"], "maxRunDuration": None},
            ZONAL,
            "gke-gpu:gpuPools[0].reservation.type: 'SPECIFIC' is not used: capacityLadder has no "
            "reservation step",
        ),
        (
            {**LADDER, "capacityLadder": ["reservation", "spot", "spot"]},
            ZONAL,
            "gke-gpu:gpuPools[0].capacityLadder[2]: spot is listed twice",
        ),
        (
            {**LADDER, "spot": True},
            ZONAL,
            "gke-gpu:gpuPools[0].spot: true is not allowed with capacityLadder: the ladder decides",
        ),
        (
            {**LADDER, "minNodes": 1},
            ZONAL,
            "gke-gpu:gpuPools[0].minNodes: 1 is not allowed with capacityLadder; allowed: 0",
        ),
        (
            {**LADDER, "capacityLadder": ["reservation", "spot"]},
            ZONAL,
            "gke-gpu:gpuPools[0].maxRunDuration: only allowed with flexStart: true or a capacityLadder with "
            "flexStart",
        ),
        (
            {**LADDER, "capacityLadder": ["ondemand"]},
            ZONAL,
            "gke-gpu:gpuPools[0].capacityLadder[0]: 'ondemand' is not allowed; allowed: 'reservation', "
            "'onDemand', 'flexStart' or 'spot'",
        ),
        (
            {
                "name": "mega",
                "accelerator": "nvidia-h100-mega-80gb",
                "gpusPerNode": 8,
                "maxNodes": 2,
                "zones": ["us-central1-a"],
                "gpudirect": True,
                "capacityLadder": ["onDemand", "spot"],
            },
            ZONAL,
            "gke-gpu:gpuPools[0].gpudirect: true is not allowed with capacityLadder: a ComputeClass cannot "
            "attach the extra GPU NICs",
        ),
    ],
)
def test_bad_ladders_are_refused_with_the_key(pool: dict, cluster: dict, expected: str) -> None:
    pool = {k: v for k, v in pool.items() if v is not None}
    message = config_error({"cluster": cluster, "gpuPools": [pool]})
    assert expected in message, message


def test_flex_start_on_a4x_is_refused_for_a_plain_pool_too() -> None:
    pool = {"name": "gb", "accelerator": "nvidia-gb200", "maxNodes": 1, "flexStart": True}
    message = config_error({"cluster": ZONAL, "gpuPools": [pool]})
    assert (
        "gke-gpu:gpuPools[0].flexStart: true is not allowed: nvidia-gb200 machine types are not offered as"
        in message
    )


ARGS = {
    "accelerator": "nvidia-l4",
    "max_nodes": 4,
    "location": "us-central1",
    "project": "p-123456",
    "capacity_ladder": ["spot", "onDemand"],
}


def test_the_component_checks_its_ladder() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        GpuCapacityLadder.check_args(
            "l4", {**ARGS, "capacity_ladder": ["spot", "spot"], "reservation": {"type": "ANY"}}
        )
    text = str(refused.value)
    assert "capacity_ladder[1]: spot is listed twice" in text
    assert "reservation.type: 'ANY' is not used: capacity_ladder has no reservation step" in text
    # The pool's own ways to get capacity are not args of the ladder at all.
    with pytest.raises(InvalidArgsError, match="spot: unknown key"):
        GpuCapacityLadder.check_args("l4", {**ARGS, "spot": True})


def test_a_node_pool_refuses_a_ladder() -> None:
    args = {**ARGS, "cluster_name": "gpu", "gpus_per_node": 1}
    with pytest.raises(InvalidArgsError) as refused:
        GpuNodePool.check_args("l4", args)
    assert "capacity_ladder: unknown key" in str(refused.value)


def test_the_cost_estimate_explains_the_ladder(ladder: RunResult) -> None:
    from tools import cost, plan

    document = plan.to_document(ladder)
    estimate = cost.estimate(document)
    (pool,) = estimate["pools"]
    assert pool["kind"] == "capacity-ladder"
    assert any("capacity ladder reservation -> onDemand -> flexStart -> spot" in n for n in pool["notes"])


def test_the_docs_example_renders() -> None:
    import re
    from pathlib import Path

    import yaml

    text = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index("### The capacity ladder") :]
    block = re.search(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None
    pools = yaml.safe_load(block.group(1))["gke-gpu:gpuPools"]
    result = render(stack_config(cluster=ZONAL, gpuPools=pools))
    steps = result.one(COMPUTE_CLASS).inputs["spec"]["priorities"]
    assert [("reservations" in s, "flexStart" in s, s.get("spot", False)) for s in steps] == [
        (True, False, False),
        (False, False, False),
        (False, True, False),
        (False, False, True),
    ]


def test_a_ladder_stack_passes_the_policy_pack() -> None:
    from tools import check_policies, plan
    from tools.offline import run_program

    config = stack_config(
        cluster=ZONAL, gpuPools=[LADDER], workloads=[{"name": "nvidia-smi", "pool": "h100"}]
    )
    result = run_program(config, stack="test", preview=True)
    assert result.error is None, result.error
    document = plan.to_document(result)
    assert any(r["type"] == COMPUTE_CLASS for r in document["resources"])  # not a vacuous pass
    notes: list[str] = []
    assert [str(v) for v in check_policies.check_document(document, notes=notes)] == []


def test_a_reservation_block_is_named_as_the_compute_class_wants_it() -> None:
    name = "projects/shared-res/reservations/h100/reservationBlocks/block-1"
    result = render(
        stack_config(cluster=ZONAL, gpuPools=[{**LADDER, "reservation": {"type": "SPECIFIC", "name": name}}])
    )
    (rule, *_) = result.one(COMPUTE_CLASS).inputs["spec"]["priorities"]
    assert rule["reservations"]["specific"] == [
        {"name": "h100", "project": "shared-res", "reservationBlock": {"name": "block-1"}}
    ]
    validate(result.one(COMPUTE_CLASS).inputs)


def test_an_any_reservation_step_must_be_the_last() -> None:
    pool = {**LADDER, "reservation": {"type": "ANY"}}
    message = config_error({"cluster": ZONAL, "gpuPools": [pool]})
    assert (
        "gke-gpu:gpuPools[0].capacityLadder[0]: reservation with reservation.type ANY falls back to on-demand"
        in message
    )
    last = {**pool, "capacityLadder": ["spot", "reservation"], "maxRunDuration": None}
    result = render(stack_config(cluster=ZONAL, gpuPools=[{k: v for k, v in last.items() if v is not None}]))
    assert result.one(COMPUTE_CLASS).inputs["spec"]["priorities"][1]["reservations"] == {
        "affinity": "AnyBestEffort"
    }


def test_the_nodes_account_may_be_an_output_of_ones_own_program() -> None:
    import pulumi

    from tools.offline import run_program

    def program() -> None:
        account = pulumi.Output.from_input("nodes@p-123456.iam.gserviceaccount.com")
        GpuCapacityLadder("l4", {**ARGS, "gpus_per_node": 1, "node_service_account_email": account})

    result = run_program({}, program=program)
    assert result.error is None, result.error
    ladder = result.one("kubernetes:cloud.google.com/v1:ComputeClass").inputs
    assert "nodes@p-123456.iam.gserviceaccount.com" in str(ladder)
