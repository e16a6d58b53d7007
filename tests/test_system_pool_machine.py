"""The system pool's machine type is checked against Compute Engine's machine series and shapes
(components/data/machine_types.yaml), through the stack file and through GkeCluster's args alike."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gke_gpu.cluster.gke_cluster import GkeCluster
from gke_gpu.cluster.model import SystemPoolConfig
from gke_gpu.cluster.rules import machine_type_problem
from gke_gpu.core.catalog import load_catalog, load_machine_types
from gke_gpu.core.model import MACHINE_TYPE
from gke_gpu.core.validation import InvalidArgsError
from tests.conftest import L4_POOL, STANDARD_CLUSTER, cluster_args, config_error, settings

KEY = "gke-gpu:cluster.systemPool.machineType"
CLUSTER_ARGS = cluster_args(project="test-project")

VALID = [
    "e2-standard-4",
    "e2-medium",
    "e2-highmem-16",
    "n1-standard-1",
    "n2-highcpu-96",
    "n2d-standard-224",
    "n4-highmem-80",
    "c3-standard-22-lssd",
    "c3d-highcpu-360",
    "c4-standard-288",
    "c2-standard-60",
    "c2d-highmem-112",
    "t2d-standard-60",
    "t2a-standard-48",
    "c4a-highmem-72",
    "n2-custom-4-16384",
    "n2d-custom-8-32768-ext",
    "e2-custom-2-8192",
    "n4-custom-4-16384",
    "custom-4-15360",
    "n1-custom-2-7680",
    "m3-ultramem-32",
]


def stack(machine_type: str) -> dict[str, Any]:
    return {
        "cluster": {**STANDARD_CLUSTER, "systemPool": {"machineType": machine_type}},
        "gpuPools": [L4_POOL],
    }


def args_problems(machine_type: str) -> list[str]:
    with pytest.raises(InvalidArgsError) as info:
        GkeCluster.check_args("gpu", {**CLUSTER_ARGS, "system_pool": {"machine_type": machine_type}})
    return info.value.problems


@pytest.mark.parametrize("machine_type", VALID)
def test_valid_machine_types_pass_both_paths(machine_type: str) -> None:
    assert settings(stack(machine_type)).cluster.system_pool.machine_type == machine_type
    GkeCluster.check_args("gpu", {**CLUSTER_ARGS, "system_pool": {"machine_type": machine_type}})


def test_the_default_and_the_example_stacks_machine_type_pass() -> None:
    assert SystemPoolConfig().machine_type == "e2-standard-4"
    assert machine_type_problem("e2-standard-4", load_machine_types()) is None
    assert settings({"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL]}).cluster.system_pool is not None


def test_a_typo_gets_a_did_you_mean_naming_the_stack_key() -> None:
    message = config_error(stack("e2-standrd-4"))
    assert f"{KEY}: 'e2-standrd-4' is not a Compute Engine machine type" in message
    assert "did you mean 'e2-standard-4'?" in message


def test_a_bad_shape_lists_the_series_shapes() -> None:
    message = config_error(stack("e2-standard-3"))
    assert f"{KEY}: 'e2-standard-3' is not a Compute Engine machine type: e2 has no such shape" in message
    assert "allowed: e2-highcpu-2, " in message
    assert "e2-standard-4, e2-standard-8, e2-standard-16, e2-standard-32" in message
    assert "e2-custom-<vCPUs>-<memory in MB>" in message


def test_an_unknown_series_is_refused_with_a_did_you_mean() -> None:
    message = config_error(stack("n9-standard-4"))
    found = re.search(
        rf"{re.escape(KEY)}: 'n9-standard-4' is not a Compute Engine machine type: unknown series 'n9'; "
        r"did you mean '(n[0-9]+-standard-4)'\?",
        message,
    )
    assert found, message
    assert machine_type_problem(found.group(1), load_machine_types()) is None


def test_custom_types_only_on_series_that_have_them() -> None:
    message = config_error(stack("c3-custom-4-8192"))
    assert f"{KEY}: 'c3-custom-4-8192' is not a Compute Engine machine type: c3 has no custom" in message
    assert "custom types exist for e2, n1, n2, n2d, n4" in message
    message = config_error(stack("n2-custom-4"))
    assert f"{KEY}: 'n2-custom-4' is not a custom machine type; expected <series>-custom-" in message


def test_a_gpu_series_keeps_its_own_message() -> None:
    message = config_error(stack("g2-standard-8"))
    assert f"{KEY}: 'g2-standard-8' is a GPU machine type; the system pool is for non-GPU" in message
    assert "not a Compute Engine machine type" not in message


@pytest.mark.parametrize(
    ("machine_type", "expected"),
    [
        ("e2-standrd-4", "did you mean 'e2-standard-4'?"),
        ("e2-standard-3", "e2 has no such shape"),
        ("n9-standard-4", "unknown series 'n9'"),
        ("a2-highgpu-1g", "is a GPU machine type"),
    ],
)
def test_the_same_rules_through_gkecluster_args(machine_type: str, expected: str) -> None:
    prefix = f"system_pool.machine_type: '{machine_type}'"
    problems = args_problems(machine_type)
    assert any(p.startswith(prefix) and expected in p for p in problems), problems


def test_the_table_is_consistent() -> None:
    table = load_machine_types()
    assert set(table.series).isdisjoint(load_catalog().gpu_series)
    assert {"e2", "n1", "n2", "n2d", "n4"} <= {s.name for s in table.series.values() if s.custom}
    assert {s.name for s in table.series.values() if s.arch == "arm64"} == {"t2a", "c4a", "n4a"}
    for name in table.names():
        # Every listed shape passes the field's pattern, so none is unreachable.
        assert re.fullmatch(MACHINE_TYPE.strip("^$"), name) and len(name) <= 63, name
        assert machine_type_problem(name, table) is None
