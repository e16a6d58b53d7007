"""The cluster's minimum GKE version, its maintenance window and exclusions (issue 25, item 8), the
version gates the pools' rules check against that version, and the monitoring packages GKE keeps."""

from __future__ import annotations

from typing import Any

import pytest

from gke_gpu.cluster.gke_managed import monitoring_components
from gke_gpu.core.gke_version import below, parse, satisfies
from tests.conftest import L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tests.test_cluster import GKE_DEFAULT_PACKAGES


def refused(**keys: Any) -> list[str]:
    """The problems of a stack file with these `gke-gpu:` keys (it must be refused)."""
    message = config_error(keys)
    return [line.strip().removeprefix("- ") for line in message.splitlines()[1:]]


CLUSTER = "gcp:container/cluster:Cluster"
FLEX = {**L4_POOL, "flexStart": True}
HOLD = {
    "name": "training-run",
    "start": "2027-01-04T00:00:00Z",
    "end": "2027-03-01T00:00:00Z",
    "scope": "NO_MINOR_OR_NODE_UPGRADES",
}


def cluster_inputs(**cluster: Any) -> dict[str, Any]:
    result = render(stack_config(cluster={**STANDARD_CLUSTER, **cluster}, gpuPools=[L4_POOL]))
    assert result.error is None, result.error
    return result.one(CLUSTER).inputs


def test_version_and_maintenance_reach_the_cluster_as_gke_returns_them() -> None:
    inputs = cluster_inputs(
        minimumVersion="1.33.5-gke.1080000",
        maintenance={
            "dailyWindowStart": "03:00",
            "exclusions": [
                # An offset is sent in UTC, as GKE returns it (otherwise a permanent diff).
                {**HOLD, "start": "2027-01-04T01:00:00+01:00"},
                {
                    "name": "until-eos",
                    "start": "2027-01-04T00:00:00Z",
                    "untilEndOfSupport": True,
                    "scope": "NO_MINOR_UPGRADES",
                },
            ],
        },
    )
    assert inputs["minMasterVersion"] == "1.33.5-gke.1080000"
    assert inputs["maintenancePolicy"] == {
        "dailyMaintenanceWindow": {"startTime": "03:00"},
        "maintenanceExclusions": [
            {
                "exclusionName": "training-run",
                "startTime": "2027-01-04T00:00:00Z",
                "endTime": "2027-03-01T00:00:00Z",
                "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"},
            },
            {
                "exclusionName": "until-eos",
                "startTime": "2027-01-04T00:00:00Z",
                "exclusionOptions": {"scope": "NO_MINOR_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
            },
        ],
    }


def test_without_them_the_cluster_is_left_to_gke() -> None:
    inputs = cluster_inputs()
    assert "minMasterVersion" not in inputs
    assert "maintenancePolicy" not in inputs


@pytest.mark.parametrize(
    ("exclusion", "expected"),
    [
        (
            {**HOLD, "scope": "NO_UPGRADES", "end": "2027-02-04T00:00:01Z"},
            "gke-gpu:cluster.maintenance.exclusions[0].end: '2027-02-04T00:00:01Z' makes a NO_UPGRADES "
            "exclusion of 31 days; GKE allows at most 30",
        ),
        (
            {**HOLD, "end": "2027-01-03T00:00:00Z"},
            "gke-gpu:cluster.maintenance.exclusions[0].end: '2027-01-03T00:00:00Z' is not after start",
        ),
        (
            {k: v for k, v in HOLD.items() if k != "end"},
            "gke-gpu:cluster.maintenance.exclusions[0].end: missing; an exclusion ends at a time (end) or",
        ),
        (
            {**HOLD, "untilEndOfSupport": True},
            "gke-gpu:cluster.maintenance.exclusions[0].end: not allowed with untilEndOfSupport: true",
        ),
        (
            {**HOLD, "end": None, "untilEndOfSupport": True, "scope": "NO_UPGRADES"},
            "gke-gpu:cluster.maintenance.exclusions[0].untilEndOfSupport: not allowed with scope NO_UPGRADES",
        ),
        ({**HOLD, "end": "2027-02-30T00:00:00Z"}, "gke-gpu:cluster.maintenance.exclusions[0].end: "),
        ({**HOLD, "end": "next week"}, "gke-gpu:cluster.maintenance.exclusions[0].end: "),
        ({**HOLD, "scope": "NEVER"}, "gke-gpu:cluster.maintenance.exclusions[0].scope: "),
    ],
    ids=[
        "no-upgrades-31-days",
        "end-before-start",
        "no-end",
        "both-ends",
        "eos-no-upgrades",
        "no-such-day",
        "not-rfc3339",
        "scope",
    ],
)
def test_a_bad_exclusion_is_refused_by_name(exclusion: dict[str, Any], expected: str) -> None:
    exclusion = {k: v for k, v in exclusion.items() if v is not None}
    problems = refused(
        **dict(cluster={**STANDARD_CLUSTER, "maintenance": {"exclusions": [exclusion]}}, gpuPools=[L4_POOL])
    )
    assert any(p.startswith(expected) for p in problems), problems


def test_a_thirty_day_no_upgrades_exclusion_is_allowed() -> None:
    inputs = cluster_inputs(
        maintenance={"exclusions": [{**HOLD, "scope": "NO_UPGRADES", "end": "2027-02-03T00:00:00Z"}]}
    )
    assert inputs["maintenancePolicy"]["maintenanceExclusions"][0]["exclusionOptions"] == {
        "scope": "NO_UPGRADES"
    }


def test_every_bad_exclusion_is_listed_at_once_and_names_are_unique() -> None:
    problems = refused(
        **dict(
            cluster={
                **STANDARD_CLUSTER,
                "minimumVersion": "1.33.x",
                "maintenance": {"dailyWindowStart": "25:00", "exclusions": [HOLD, HOLD]},
            },
            gpuPools=[L4_POOL],
        )
    )
    assert any(p.startswith("gke-gpu:cluster.minimumVersion: ") for p in problems), problems
    assert any(p.startswith("gke-gpu:cluster.maintenance.dailyWindowStart: ") for p in problems), problems


def test_duplicate_exclusion_names_are_refused() -> None:
    problems = refused(
        **dict(cluster={**STANDARD_CLUSTER, "maintenance": {"exclusions": [HOLD, HOLD]}}, gpuPools=[L4_POOL])
    )
    assert problems == [
        "gke-gpu:cluster.maintenance.exclusions[1].name: 'training-run' is already the name of "
        "exclusions[0]; GKE keeps one exclusion per name"
    ]


def test_an_existing_cluster_takes_neither() -> None:
    problems = refused(
        **dict(
            cluster={
                "mode": "existing",
                "kubeconfig": "apiVersion: v1",
                "minimumVersion": "1.33",
                "maintenance": {},
            }
        )
    )
    for key in ("minimumVersion", "maintenance"):
        assert any(
            p.startswith(f"gke-gpu:cluster.{key}: not allowed with mode existing") for p in problems
        ), problems


# -- Version gates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "is_below", "is_satisfied"),
    [
        ("1.31", True, False),
        ("1.32", False, False),
        ("1.32.1", True, False),
        ("1.32.2", False, False),
        ("1.32.2-gke.100", True, False),
        ("1.32.2-gke.1652000", False, True),
        ("1.33", False, True),
    ],
)
def test_a_version_prefix_is_below_a_gate_only_when_every_build_it_names_is(
    version: str, is_below: bool, is_satisfied: bool
) -> None:
    assert below(version, "1.32.2-gke.1652000") is is_below
    assert satisfies(version, "1.32.2-gke.1652000") is is_satisfied


def test_a_malformed_version_is_refused_by_the_parser() -> None:
    with pytest.raises(ValueError, match="not a GKE version"):
        parse("1.33.x")


def test_a_minimum_version_below_a_gate_the_pool_needs_is_refused() -> None:
    problems = refused(
        **dict(cluster={**STANDARD_CLUSTER, "minimumVersion": "1.31.9-gke.1000000"}, gpuPools=[FLEX])
    )
    assert problems == [
        "gke-gpu:gpuPools[0].flexStart: flexStart needs GKE 1.32.2-gke.1652000 or later, but "
        "gke-gpu:cluster.minimumVersion is '1.31.9-gke.1000000'; raise it to 1.32.2-gke.1652000 or later, or "
        "remove flexStart"
    ]


@pytest.mark.parametrize(("version", "noted"), [("1.33.5-gke.1080000", False), ("1.32", True), (None, True)])
def test_a_minimum_version_that_meets_the_gate_drops_the_note(version: str | None, noted: bool) -> None:
    cluster = {**STANDARD_CLUSTER, **({"minimumVersion": version} if version else {})}
    result = render(stack_config(cluster=cluster, gpuPools=[FLEX]))
    assert result.error is None, result.error
    assert any("flexStart needs GKE 1.32.2-gke.1652000" in w for w in result.warnings) is noted


def test_gpudirect_gates_by_the_versions_minor() -> None:
    mega = {
        "name": "mega",
        "accelerator": "nvidia-h100-mega-80gb",
        "gpusPerNode": 8,
        "maxNodes": 2,
        "zones": ["us-central1-a"],
        "gpudirect": True,
        "compactPlacement": True,
    }
    problems = refused(
        **dict(cluster={**STANDARD_CLUSTER, "minimumVersion": "1.31.13-gke.1000000"}, gpuPools=[mega])
    )
    assert any(
        p.startswith("gke-gpu:gpuPools[0].gpudirect: GPUDirect-TCPXO needs GKE 1.31.14-gke.1243000 or later")
        for p in problems
    ), problems
    result = render(stack_config(cluster={**STANDARD_CLUSTER, "minimumVersion": "1.34"}, gpuPools=[mega]))
    assert result.error is None, result.error
    assert not any("GPUDirect-TCPXO needs GKE" in w for w in result.warnings)


# -- Monitoring packages -----------------------------------------------------------------------------


def test_monitoring_keeps_gkes_default_packages_and_adds_dcgm() -> None:
    components = cluster_inputs()["monitoringConfig"]["enableComponents"]
    assert components[0] == "SYSTEM_COMPONENTS" and components[-1] == "DCGM"
    assert set(GKE_DEFAULT_PACKAGES) <= set(components)


def test_a_package_newer_than_the_minimum_version_is_left_to_gke() -> None:
    old = monitoring_components(managed_dcgm=False, minimum_version="1.31")
    assert "JOBSET" not in old and "KUBELET" in old
    assert "JOBSET" in monitoring_components(managed_dcgm=False, minimum_version="1.32.1-gke.1357001")


# -- GkeCluster's own args (a program without a stack file) -------------------------------------------


def test_gkecluster_takes_the_same_settings_by_their_snake_case_names() -> None:
    from tests.test_cluster import declare

    result = declare(
        minimum_version="1.34",
        maintenance={"daily_window_start": "22:30", "exclusions": [{**HOLD, "scope": "NO_MINOR_UPGRADES"}]},
    )
    assert result.error is None, result.error
    inputs = result.one(CLUSTER).inputs
    assert inputs["minMasterVersion"] == "1.34"
    assert inputs["maintenancePolicy"]["dailyMaintenanceWindow"] == {"startTime": "22:30"}


def test_gkecluster_refuses_a_long_no_upgrades_exclusion_by_its_arg_before_declaring_anything() -> None:
    from gke_gpu import GkeCluster, InvalidArgsError
    from tools.offline import run_program

    args = {
        "project": "test-project",
        "name": "gpu-test",
        "location": "us-central1",
        "autopilot": False,
        "network": "net",
        "subnetwork": "subnet",
        "pods_range_name": "pods",
        "services_range_name": "services",
        "maintenance": {"exclusions": [{**HOLD, "scope": "NO_UPGRADES"}]},
    }

    def program() -> dict[str, Any]:
        GkeCluster("gke", args)  # type: ignore[arg-type]
        return {}

    result = run_program({}, program=program)
    assert isinstance(result.error, InvalidArgsError), result.error
    assert result.error.problems == [
        "maintenance.exclusions[0].end: '2027-03-01T00:00:00Z' makes a NO_UPGRADES exclusion of 56 days; "
        "GKE allows at most 30 (security patches must reach the cluster); hold minor and node upgrades "
        "longer with scope NO_MINOR_OR_NODE_UPGRADES"
    ]
    assert result.resources == []


@pytest.mark.parametrize(("dcgm", "noted"), [("managed", True), ("none", True), ("exporter", False)])
def test_the_render_says_where_a_mig_instance_may_not_raise_the_idle_alert(dcgm: str, noted: bool) -> None:
    a100 = {"name": "mig", "accelerator": "nvidia-tesla-a100", "maxNodes": 1, "migPartitionSize": "1g.5gb"}
    monitoring = {
        "dcgm": dcgm,
        "alerts": {"enabled": True, "notificationChannels": ["projects/test-project/notificationChannels/1"]},
    }
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[a100], monitoring=monitoring))
    assert result.error is None, result.error
    notes = [w for w in result.warnings if "split GPUs with MIG" in w]
    assert bool(notes) is noted, result.warnings
