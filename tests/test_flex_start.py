"""DWS flex-start on a Standard GPU pool (issue 10, capacity): the stack file's `flexStart` and
`maxRunDuration`, GpuNodePool's `flex_start` and `max_run_duration`, checked by the same rules."""

import pytest

from gke_gpu import GpuNodePool, InvalidArgsError
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    ULTRA_POOL,
    config_error,
    pool_args,
    render,
    settings,
    stack_config,
)
from tools.cost import estimate
from tools.offline import run_program

FLEX = {**L4_POOL, "flexStart": True}


def node_pool(pool: dict) -> dict:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool]))
    return result.one("gcp:container/nodePool:NodePool", "gpu-l4-pool").inputs


def test_a_flex_start_pool_asks_gke_for_flex_start_vms_without_auto_repair() -> None:
    inputs = node_pool({**FLEX, "maxRunDuration": "24h"})
    assert inputs["nodeConfig"]["flexStart"] is True
    assert inputs["nodeConfig"]["maxRunDuration"] == "86400s"
    assert inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert inputs["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert "spot" not in inputs["nodeConfig"] or inputs["nodeConfig"]["spot"] is False


def test_without_flex_start_nothing_changes() -> None:
    inputs = node_pool(L4_POOL)
    assert "flexStart" not in inputs["nodeConfig"]
    assert "maxRunDuration" not in inputs["nodeConfig"]
    assert inputs["management"]["autoRepair"] is True


def test_the_render_notes_the_gke_version_flex_start_needs() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[FLEX]))
    assert any("gke-gpu:gpuPools[0]: flexStart needs GKE 1.32.2-gke.1652000" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"spot": True}, "gke-gpu:gpuPools[0].spot: true is not allowed with flexStart"),
        (
            {"reservation": {"type": "ANY"}},
            "gke-gpu:gpuPools[0].reservation.type: 'ANY' is not allowed with flexStart",
        ),
        (
            {"maxRunDuration": "8d"},
            "gke-gpu:gpuPools[0].maxRunDuration: '8d' is longer than flex-start's limit",
        ),
        (
            {"maxRunDuration": "1w"},
            "gke-gpu:gpuPools[0].maxRunDuration: '1w' is not allowed; expected a duration",
        ),
        (
            {"flexStart": False, "maxRunDuration": "1h"},
            "gke-gpu:gpuPools[0].maxRunDuration: only allowed with flexStart",
        ),
    ],
)
def test_bad_flex_start_settings_are_refused_by_key(extra: dict, expected: str) -> None:
    assert expected in config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [{**FLEX, **extra}]})


def test_flex_start_is_standard_only() -> None:
    message = config_error(
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4", "flexStart": True}],
        }
    )
    assert "gke-gpu:gpuPools[0].flexStart: not allowed on Autopilot" in message


def test_the_library_takes_flex_start_and_refuses_it_with_spot() -> None:
    args = pool_args(cluster_name="c", flex_start=True, max_run_duration="90m")
    result = run_program({}, program=lambda: GpuNodePool("train", args))
    assert result.error is None, result.error
    assert result.one("gcp:container/nodePool:NodePool").inputs["nodeConfig"]["maxRunDuration"] == "5400s"
    result = run_program({}, program=lambda: GpuNodePool("train", {**args, "spot": True}))
    assert isinstance(result.error, InvalidArgsError)
    assert result.error.problems == [
        "spot: true is not allowed with flex_start: flex-start obtains on-demand capacity for a limited "
        "time; use one or the other"
    ]
    assert result.resources == []


def test_the_cost_estimate_says_why_it_has_no_flex_start_price() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[FLEX]))
    (pool,) = result.outputs["gpuPools"]
    assert pool["flexStart"] is True
    (entry,) = estimate({"outputs": result.outputs})["pools"]
    assert entry["nodeHourly"]["onDemand"] == "n/a"
    assert "flex-start VMs are billed at Dynamic Workload Scheduler prices" in entry["reasons"]["onDemand"]


def test_the_cost_estimate_says_why_it_has_no_queued_provisioning_price() -> None:
    queued = {**L4_POOL, "queuedProvisioning": True}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[queued, {**L4_POOL, "name": "plain"}]))
    assert result.outputs["gpuPools"][0]["queuedProvisioning"] is True
    entry, plain = estimate({"outputs": result.outputs})["pools"]
    assert entry["nodeHourly"]["onDemand"] == "n/a"
    assert (
        "queued-provisioning nodes are billed at Dynamic Workload Scheduler prices"
        in entry["reasons"]["onDemand"]
    )
    assert plain["nodeHourly"]["onDemand"] != "n/a"


def test_the_settings_keep_the_run_limit_in_seconds() -> None:
    (pool,) = settings(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [{**FLEX, "maxRunDuration": "7d"}]}
    ).gpu_pools
    assert (pool.flex_start, pool.max_run_seconds) == (True, 604800)


QUEUED = {**L4_POOL, "queuedProvisioning": True}


def test_queued_provisioning_uses_flex_start_vms_as_gke_documents_it_today() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[QUEUED]))
    inputs = result.one("gcp:container/nodePool:NodePool", "gpu-l4-pool").inputs
    assert inputs["queuedProvisioning"] == {"enabled": True}
    assert inputs["nodeConfig"]["flexStart"] is True
    assert inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert inputs["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert inputs["autoscaling"]["totalMinNodeCount"] == 0
    assert inputs["autoscaling"]["locationPolicy"] == "ANY"
    assert "placementPolicy" not in inputs
    assert any(
        "gke-gpu:gpuPools[0]: queuedProvisioning uses flex-start VMs" in w and "1.32.2-gke.1652000" in w
        for w in result.warnings
    )
    assert result.outputs["gpuPools"][0]["flexStart"] is True


def test_flex_start_false_keeps_the_older_queued_provisioning_with_a_note() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[{**QUEUED, "flexStart": False}]))
    inputs = result.one("gcp:container/nodePool:NodePool", "gpu-l4-pool").inputs
    assert inputs["queuedProvisioning"] == {"enabled": True}
    assert "flexStart" not in inputs["nodeConfig"]
    assert "upgradeSettings" not in inputs  # GKE still owns the strategy of a queued pool
    assert any(
        "queuedProvisioning without flexStart is GKE's older queued provisioning" in w
        for w in result.warnings
    )


def test_queued_and_flex_start_together_are_accepted_and_a_run_limit_is_kept() -> None:
    (pool,) = settings(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [{**QUEUED, "flexStart": True, "maxRunDuration": "2d"}]}
    ).gpu_pools
    assert (pool.queued_provisioning, pool.flex_start, pool.max_run_seconds) == (True, True, 172800)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            {"reservation": {"type": "ANY"}},
            "gke-gpu:gpuPools[0].reservation.type: 'ANY' is not allowed with queuedProvisioning",
        ),
        (
            {"minNodes": 1, "zones": ["us-central1-a"]},
            "gke-gpu:gpuPools[0].minNodes: 1 is not allowed with queuedProvisioning",
        ),
        ({"spot": True}, "gke-gpu:gpuPools[0].spot: true is not allowed with queuedProvisioning"),
        (
            {"compactPlacement": True, "zones": ["us-central1-a"]},
            "gke-gpu:gpuPools[0].compactPlacement: true is not allowed with queuedProvisioning",
        ),
        (
            {"maxRunDuration": "8d"},
            "gke-gpu:gpuPools[0].maxRunDuration: '8d' is longer than flex-start's limit",
        ),
    ],
)
def test_a_queued_flex_start_pool_with_settings_gke_refuses_is_refused_once_by_key(
    extra: dict, expected: str
) -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [{**QUEUED, **extra}]})
    assert expected in message
    key = expected.split(": ", 1)[0]
    assert message.count(key + ":") == 1, message


def test_a_flex_start_example_stack_renders_and_passes_the_policy_pack() -> None:
    """The flex-start example: an A3 Ultra pool on flex-start VMs with GPUDirect and compact placement
    (flex-start takes it on A3 Ultra), and flex-start with queued provisioning on L4."""
    from tools import check_policies, plan
    from tools.offline import run_program

    ultra = {**ULTRA_POOL, "flexStart": True, "maxRunDuration": "7d", "compactPlacement": True}
    config = stack_config(
        cluster={**STANDARD_CLUSTER, "location": "us-central1-b"},
        gpuPools=[ultra, {**QUEUED, "zones": ["us-central1-b"]}],
        batch={"kueue": True},
    )
    result = run_program(config, stack="test", preview=True)
    assert result.error is None, result.error
    pools = {r.name: r for r in result.of_type("gcp:container/nodePool:NodePool")}
    assert pools["gpu-ultra-pool"].inputs["nodeConfig"]["flexStart"] is True
    assert pools["gpu-ultra-pool"].inputs["placementPolicy"] == {"type": "COMPACT"}
    assert "upgradeSettings" not in pools["gpu-l4-pool"].inputs
    document = plan.to_document(result)
    assert [str(v) for v in check_policies.check_document(document, notes=[])] == []
