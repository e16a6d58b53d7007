"""GpuNodePool as a library user declares it: a dict of args, checked at the component's boundary.

The six required args give the same derivations a stack file gets (machine type, zones, taint,
autoscaling); every bad arg is refused by name, all at once, before anything is declared."""

import pulumi
import pytest

from gke_gpu import GpuNodePool, InvalidArgsError
from tests.conftest import pool_args
from tools.offline import RunResult, run_program

REQUIRED = pool_args()


def declare(args: dict, *, name: str = "train") -> RunResult:
    return run_program({}, program=lambda: GpuNodePool(name, args))


def node_pool(args: dict) -> dict:
    result = declare(args)
    assert result.error is None, result.error
    (pool,) = result.of_type("gcp:container/nodePool:NodePool")
    assert pool.parent == result.one("gke-gpu:index:GpuNodePool").urn
    return pool.inputs


def refused(args: dict) -> InvalidArgsError:
    result = declare(args)
    assert isinstance(result.error, InvalidArgsError), result.error
    assert result.resources == [], "nothing is declared, not even the component"
    return result.error


def test_the_six_required_args_get_the_stack_files_derivations() -> None:
    inputs = node_pool(REQUIRED)
    assert inputs["name"] == "train"
    assert inputs["project"] == "p-123456"
    assert inputs["cluster"] == "gpu-cluster"
    assert inputs["nodeConfig"]["machineType"] == "g2-standard-8"
    assert inputs["nodeLocations"] == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert inputs["nodeConfig"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    ]
    assert inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}
    assert inputs["nodeConfig"]["guestAccelerators"][0]["count"] == 1
    assert inputs["nodeConfig"]["diskType"] == "pd-balanced"


def test_a_zonal_location_puts_the_nodes_in_that_zone() -> None:
    inputs = node_pool({**REQUIRED, "location": "us-central1-b"})
    assert inputs["location"] == "us-central1-b"
    assert inputs["nodeLocations"] == ["us-central1-b"]


def test_outputs_carry_the_derived_values() -> None:
    seen: dict = {}

    def program() -> None:
        pool = GpuNodePool("train", {**REQUIRED, "gpus_per_node": 2})
        pulumi.Output.all(pool.machine_type, pool.zones, pool.schedulable_gpus_per_node).apply(
            lambda values: seen.update(values=values)
        )

    result = run_program({}, program=program)
    assert result.error is None, result.error
    assert seen["values"] == ["g2-standard-24", ["us-central1-a", "us-central1-b", "us-central1-c"], 2]


def test_integers_that_arrive_as_floats_are_taken_as_integers() -> None:
    inputs = node_pool({**REQUIRED, "gpus_per_node": 2.0, "max_nodes": 4.0, "disk_size_gb": 100.0})
    assert inputs["nodeConfig"]["guestAccelerators"][0]["count"] == 2
    assert inputs["autoscaling"]["totalMaxNodeCount"] == 4
    assert inputs["nodeConfig"]["diskSizeGb"] == 100


def test_an_output_for_the_cluster_name_is_forwarded_unchecked() -> None:
    def program() -> None:
        GpuNodePool("train", {**REQUIRED, "cluster_name": pulumi.Output.from_input("from-a-cluster")})

    result = run_program({}, program=program)
    assert result.error is None, result.error
    assert result.one("gcp:container/nodePool:NodePool").inputs["cluster"] == "from-a-cluster"


def test_enum_members_and_their_strings_are_the_same_arg() -> None:
    from gke_gpu.gpu.pool_args import GpuSharingStrategy

    sharing = {"strategy": GpuSharingStrategy.TIME_SHARING, "max_clients_per_gpu": 4}
    inputs = node_pool({**REQUIRED, "sharing": sharing})
    assert inputs["nodeConfig"]["guestAccelerators"][0]["gpuSharingConfig"] == {
        "gpuSharingStrategy": "TIME_SHARING",
        "maxSharedClientsPerGpu": 4,
    }


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ({"accelerator": "nvidia-l5"}, "accelerator: 'nvidia-l5' is not a GKE accelerator in the catalog"),
        ({"gpus_per_node": 3}, "gpus_per_node: 3 is not offered for nvidia-l4; allowed: 1, 2, 4, 8"),
        ({"gpus_per_node": 2.5}, "gpus_per_node: 2.5 is not allowed; expected a whole number"),
        ({"zones": ["us-central1-f"]}, "zones[0]: 'us-central1-f' does not offer nvidia-l4"),
        ({"zones": ["europe-west4-a"]}, "zones[0]: 'europe-west4-a' is not a zone of region us-central1"),
        (
            {"spot": True, "reservation": {"type": "SPECIFIC", "name": "r1"}},
            "spot: true is not allowed with reservation.type SPECIFIC",
        ),
        (
            {"gpus_per_nodes": 1},
            "gpus_per_nodes: unknown key; allowed keys here: accelerator, additional_node_networks, "
            "cluster_name",
        ),
        ({"sharing": {"strategy": "MPS", "max_clients": 4}}, "sharing.max_clients: unknown key"),
        (
            {"sharing": {"strategy": "SLICED", "max_clients_per_gpu": 4}},
            "sharing.strategy: 'SLICED' is not allowed",
        ),
        ({"location": "us-centrall1"}, "location: 'us-centrall1' is not a Compute Engine region or zone"),
        ({"project": "Bad_Project"}, "project: 'Bad_Project' is not allowed"),
        ({"min_nodes": 3}, "min_nodes: 3 is greater than max_nodes 2"),
        ({"on_demand_fallback": True}, "on_demand_fallback: unknown key; allowed keys here: accelerator,"),
    ],
)
def test_bad_args_are_refused_by_name_and_nothing_is_declared(bad: dict, expected: str) -> None:
    error = refused({**REQUIRED, **bad})
    assert any(problem.startswith(expected) for problem in error.problems), error.problems
    assert str(error).startswith("GpuNodePool 'train': invalid args")


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_each_required_arg_is_required(missing: str) -> None:
    args = {k: v for k, v in REQUIRED.items() if k != missing}
    assert refused(args).problems == [f"{missing}: required"]


def test_every_independent_problem_at_once() -> None:
    error = refused({**REQUIRED, "gpus_per_node": 3, "disk_size_gb": 5, "colour": "red"})
    assert len(error.problems) == 2, "shape problems first; catalog rules only on a shape-valid pool"
    assert {p.split(":")[0] for p in error.problems} == {"disk_size_gb", "colour"}
    error = refused({**REQUIRED, "gpus_per_node": 3, "zones": ["us-central1-f"]})
    assert [p.split(":")[0] for p in error.problems] == ["gpus_per_node", "zones[0]"]


def test_args_that_are_not_a_dict_are_refused() -> None:
    assert refused(None).problems == ["args: null is not allowed; expected a dict"]  # type: ignore[arg-type]


def test_notes_are_logged_on_the_component() -> None:
    result = declare({**REQUIRED, "reservation": {"type": "SPECIFIC", "name": "r1"}})
    assert result.error is None, result.error
    assert any(
        "GpuNodePool 'train': reservation.name: r1 is consumed in 3 zones" in w for w in result.warnings
    ), result.warnings
