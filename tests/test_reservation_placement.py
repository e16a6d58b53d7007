"""Placement and reservations as GKE wants them (issue 25, item 4): a reservation block or a compact
placement policy, never both by accident, and the render says which one places the nodes."""

import pytest

from gke_gpu import GpuNodePool, InvalidArgsError
from tests.conftest import STANDARD_CLUSTER, config_error, pool_args, render, stack_config
from tools.offline import run_program

ULTRA = {
    "name": "ultra",
    "accelerator": "nvidia-h200-141gb",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "zones": ["us-central1-b"],
}
BLOCK = {"type": "SPECIFIC", "name": "h200-res/reservationBlocks/block-1"}
NODE_POOL = "gcp:container/nodePool:NodePool"


def test_a_reservation_block_with_compact_placement_is_refused_naming_the_key() -> None:
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [{**ULTRA, "reservation": BLOCK, "compactPlacement": True}]}
    )
    assert "gke-gpu:gpuPools[0].compactPlacement: true is not allowed with reservation.name" in message
    assert "h200-res/reservationBlocks/block-1" in message
    assert "1 problem" in message


def test_the_library_refuses_the_same_pair() -> None:
    args = pool_args(
        "nvidia-h200-141gb",
        8,
        cluster_name="c",
        zones=["us-central1-b"],
        reservation=BLOCK,
        compact_placement=True,
    )
    result = run_program({}, program=lambda: GpuNodePool("ultra", args))
    assert isinstance(result.error, InvalidArgsError)
    assert any(
        p.startswith("compact_placement: true is not allowed with reservation.name")
        for p in result.error.problems
    )
    assert result.resources == []


def test_a_reservation_block_places_the_nodes_and_the_render_says_so() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[{**ULTRA, "reservation": BLOCK}]))
    inputs = result.one(NODE_POOL, "gpu-ultra-pool").inputs
    assert "placementPolicy" not in inputs
    assert inputs["nodeConfig"]["reservationAffinity"]["values"] == ["h200-res/reservationBlocks/block-1"]
    assert any(
        "gke-gpu:gpuPools[0]: placement: the reservation block block-1" in w for w in result.warnings
    ), result.warnings


def test_compact_placement_without_a_block_says_so_too() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[{**ULTRA, "compactPlacement": True}]))
    assert result.one(NODE_POOL, "gpu-ultra-pool").inputs["placementPolicy"] == {"type": "COMPACT"}
    assert any("gke-gpu:gpuPools[0]: placement: a compact placement policy" in w for w in result.warnings)


@pytest.mark.parametrize("reservation", [{"type": "SPECIFIC", "name": "h200-res"}, {"type": "ANY"}])
def test_a_whole_reservation_with_compact_placement_is_accepted_with_a_caution(reservation: dict) -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[{**ULTRA, "reservation": reservation, "compactPlacement": True}],
        )
    )
    assert result.one(NODE_POOL, "gpu-ultra-pool").inputs["placementPolicy"] == {"type": "COMPACT"}
    assert any("must not carry a placement policy of its own" in w for w in result.warnings)
