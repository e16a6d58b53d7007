"""Each validator, called directly with real pulumi-policy argument objects.

For every rule: a compliant resource, non-compliant ones, missing props, unknown props (both the
offline render's marker and a real preview's sentinel behind pulumi-policy's proxy), and config.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from google.protobuf import struct_pb2
from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, StackValidationPolicy

from policy.gke_gpu_policies import dra, props, rules, scale_out, security, serving, teams
from policy.gke_gpu_policies.constants import CLUSTER, NODE_POOL, SHARING_TRUSTED_LABEL
from policy.tests.factories import (
    DELETE,
    GPU_TOLERATION,
    JOB,
    UNKNOWN_KINDS,
    WORKLOAD_TYPES,
    autopilot_cluster,
    check,
    cpu_pool,
    gpu_pod_spec,
    gpu_pool,
    one,
    policy_resource,
    resource_args,
    set_path,
    shared_pool,
    stack_args,
    standard_cluster,
    unknown,
    violations,
    workload,
)

GPU_LIMIT = ("containers", "0", "resources", "limits", "nvidia.com/gpu")
GPU_REQUEST = ("containers", "0", "resources", "requests", "nvidia.com/gpu")


# --------------------------------------------------------------------------------------------------
# The pack itself.


def test_policy_names_are_unique_and_every_validator_is_served() -> None:
    names = [p.name for p in rules.POLICIES]
    assert len(names) == len(set(names)) == 22
    assert all(isinstance(p, (ResourceValidationPolicy, StackValidationPolicy)) for p in rules.POLICIES)
    served = {p.name for p in rules.POLICIES}
    declared = {
        v
        for module in (rules, scale_out, teams, serving, security, dra)
        for k, v in vars(module).items()
        if k.isupper() and isinstance(v, str) and v in served
    }
    assert declared == served


def test_config_schemas_have_defaults_and_survive_the_wire() -> None:
    for policy in rules.POLICIES:
        if policy.config_schema is None:
            continue
        assert isinstance(policy.config_schema, PolicyConfigSchema)
        for key, schema in policy.config_schema.properties.items():
            assert "default" in schema and "description" in schema, (policy.name, key)
        # GetAnalyzerInfo copies the schema into a protobuf Struct.
        struct_pb2.Struct().update(policy.config_schema.properties)
        json.dumps(policy.config_schema.properties)


def test_offline_markers_match_the_renderer() -> None:
    from tools import offline

    assert props.OFFLINE_UNKNOWN == offline.UNKNOWN
    assert set(props.OFFLINE_SECRETS) == {offline.SECRET, offline.SECRET_NOT_DECRYPTED}


# --------------------------------------------------------------------------------------------------
# props helpers.


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
@pytest.mark.parametrize("proxy", [True, False])
def test_get_turns_unknowns_into_unknown(kind: str, proxy: bool) -> None:
    data = {"a": {"b": unknown(kind), "c": [1, unknown(kind)]}, "d": None}
    wrapped = resource_args(NODE_POOL, data, proxy=proxy).props
    assert props.get(wrapped, "a", "b") is props.UNKNOWN
    assert props.get(wrapped, "a", "b", "deeper") is props.UNKNOWN
    assert props.get(wrapped, "a", "c", 0) == 1
    assert props.get(wrapped, "a", "c", 1) is props.UNKNOWN
    assert props.items(props.get(wrapped, "a", "c")) == [1, props.UNKNOWN]
    entries = props.entries(props.get(wrapped, "a"))
    assert isinstance(entries, dict) and set(entries) == {"b", "c"} and entries["b"] is props.UNKNOWN
    assert props.entries(props.get(wrapped, "a", "b")) is props.UNKNOWN
    assert props.get(wrapped, "missing", "x") is None
    assert props.get(wrapped, "d", "x") is None
    assert props.get(wrapped, "a", "c", 5) is None


def test_unknown_has_no_truth_value() -> None:
    with pytest.raises(TypeError):
        bool(props.UNKNOWN)
    # One value (copies too), shown as UNKNOWN in a message.
    assert copy.deepcopy(props.UNKNOWN) is props.UNKNOWN
    assert str(props.UNKNOWN) == f"{props.UNKNOWN}" == repr(props.UNKNOWN) == "UNKNOWN"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (2.0, 2),
        ("4", 4),
        (" 3 ", 3),
        (1.5, None),
        ("500m", None),
        ("0.5", None),
        (True, None),
        (None, None),
    ],
)
def test_as_int(value: Any, expected: int | None) -> None:
    assert props.as_int(value) == expected


def test_stack_of(monkeypatch: pytest.MonkeyPatch) -> None:
    assert props.stack_of("urn:pulumi:prod-eu::gke-gpu::gcp:container/cluster:Cluster::c") == "prod-eu"
    monkeypatch.setenv("PULUMI_STACK", "from-env")
    assert props.stack_of("not-a-urn") == "from-env"
    monkeypatch.delenv("PULUMI_STACK")
    assert props.stack_of("") is None


# --------------------------------------------------------------------------------------------------
# gpu-pool-taint


def test_taint_compliant_gpu_pool() -> None:
    assert check(rules.validate_gpu_pool_taint, NODE_POOL, gpu_pool()) == []


@pytest.mark.parametrize(
    "taints",
    [
        DELETE,
        [],
        [{"key": "nvidia.com/gpu", "value": "present", "effect": "PREFER_NO_SCHEDULE"}],
        [{"key": "dedicated", "value": "ml", "effect": "NO_SCHEDULE"}],
    ],
)
def test_taint_missing_or_wrong(taints: Any) -> None:
    pool = gpu_pool(**{"nodeConfig.taints": taints})
    messages = check(rules.validate_gpu_pool_taint, NODE_POOL, pool, name="gpu-l4-pool")
    one(messages, rules.GPU_POOL_TAINT, "GPU node pool 'gpu-l4-pool'", "nvidia.com/gpu:NO_SCHEDULE")


def test_taint_not_required_on_cpu_pools_or_other_types() -> None:
    assert check(rules.validate_gpu_pool_taint, NODE_POOL, cpu_pool()) == []
    no_gpus = gpu_pool(**{"nodeConfig.guestAccelerators": [], "nodeConfig.taints": DELETE})
    assert check(rules.validate_gpu_pool_taint, NODE_POOL, no_gpus) == []
    assert check(rules.validate_gpu_pool_taint, CLUSTER, gpu_pool(**{"nodeConfig.taints": DELETE})) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
@pytest.mark.parametrize(
    "path",
    ["nodeConfig.taints", "nodeConfig.taints.0", "nodeConfig.taints.0.key", "nodeConfig.guestAccelerators"],
)
def test_taint_unknown_is_not_a_violation(kind: str, path: str) -> None:
    pool = gpu_pool(**{"nodeConfig.taints.0.effect": "NO_EXECUTE"})
    pool = set_path(pool, path, unknown(kind))
    assert check(rules.validate_gpu_pool_taint, NODE_POOL, pool) == []


def test_taint_also_found_among_other_taints_without_the_proxy() -> None:
    taints = [
        {"key": "dedicated", "value": "ml", "effect": "NO_SCHEDULE"},
        gpu_pool()["nodeConfig"]["taints"][0],
    ]
    pool = gpu_pool(**{"nodeConfig.taints": taints})
    assert check(rules.validate_gpu_pool_taint, NODE_POOL, pool, proxy=False) == []


# --------------------------------------------------------------------------------------------------
# gpu-pool-autoscaling-max


@pytest.mark.parametrize(
    "autoscaling",
    [
        {"totalMinNodeCount": 0, "totalMaxNodeCount": 4},
        {"minNodeCount": 0, "maxNodeCount": 2},
        {"totalMaxNodeCount": 4.0},  # numbers arrive as floats from the engine
    ],
)
def test_autoscaling_with_a_max(autoscaling: dict[str, Any]) -> None:
    pool = gpu_pool(autoscaling=autoscaling)
    assert check(rules.validate_gpu_pool_autoscaling, NODE_POOL, pool) == []


def test_autoscaling_missing() -> None:
    pool = gpu_pool(autoscaling=DELETE, nodeCount=2)
    messages = check(rules.validate_gpu_pool_autoscaling, NODE_POOL, pool, name="gpu-a100-pool")
    one(messages, rules.GPU_POOL_AUTOSCALING, "'gpu-a100-pool'", "no autoscaling block")


@pytest.mark.parametrize(
    "autoscaling", [{}, {"totalMinNodeCount": 1}, {"locationPolicy": "ANY", "minNodeCount": 0}]
)
def test_autoscaling_without_a_max(autoscaling: dict[str, Any]) -> None:
    messages = check(rules.validate_gpu_pool_autoscaling, NODE_POOL, gpu_pool(autoscaling=autoscaling))
    one(messages, rules.GPU_POOL_AUTOSCALING, "no maximum")


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
@pytest.mark.parametrize("path", ["autoscaling", "autoscaling.totalMaxNodeCount"])
def test_autoscaling_unknown(kind: str, path: str) -> None:
    pool = set_path(gpu_pool(), path, unknown(kind))
    assert check(rules.validate_gpu_pool_autoscaling, NODE_POOL, pool) == []


def test_autoscaling_not_required_on_cpu_pools() -> None:
    assert check(rules.validate_gpu_pool_autoscaling, NODE_POOL, cpu_pool(autoscaling=DELETE)) == []


# --------------------------------------------------------------------------------------------------
# gpu-total-budget (stack)


def pool_of(max_nodes: int, gpus: int, **changes: Any) -> dict[str, Any]:
    return gpu_pool(
        **{
            "autoscaling.totalMaxNodeCount": max_nodes,
            "nodeConfig.guestAccelerators.0.count": gpus,
            **changes,
        }
    )


def budget(*pools: dict[str, Any], config: dict[str, Any] | None = None, extra: Any = ()) -> list[str]:
    resources = [(NODE_POOL, f"pool-{i}", p) for i, p in enumerate(pools)] + list(extra)
    return violations(rules.validate_gpu_budget, stack_args(resources, config=config))


def test_budget_within_default() -> None:
    # prod: 4 x 1 L4 + 2 x 1 A100, and a CPU pool that does not count however large.
    assert (
        budget(
            pool_of(4, 1),
            pool_of(2, 1),
            extra=[(NODE_POOL, "system", cpu_pool(**{"autoscaling.totalMaxNodeCount": 500}))],
        )
        == []
    )
    assert budget(pool_of(8, 8)) == []  # exactly 64


def test_budget_exceeded() -> None:
    messages = budget(pool_of(4, 1), pool_of(9, 8))
    one(messages, rules.GPU_BUDGET, "stack 'prod'", "76 GPUs", "budget of 64", "pool-1: 9 nodes x 8 GPU = 72")


@pytest.mark.parametrize(("limit", "expected"), [(5, 1), (6, 0), (6.0, 0), (0, 1)])
def test_budget_from_config(limit: float, expected: int) -> None:
    assert len(budget(pool_of(4, 1), pool_of(2, 1), config={"maxTotalGpus": limit})) == expected


def test_budget_per_zone_max_times_zones() -> None:
    three_zones = pool_of(0, 8, autoscaling={"maxNodeCount": 3})  # 3/zone x 3 nodeLocations x 8 = 72
    one(budget(three_zones), rules.GPU_BUDGET, "72 GPUs", "3/zone x 3")
    regional = pool_of(0, 8, autoscaling={"maxNodeCount": 3}, nodeLocations=DELETE)  # GKE's 3 default zones
    one(budget(regional), rules.GPU_BUDGET, "72 GPUs")
    zonal = pool_of(0, 8, autoscaling={"maxNodeCount": 3}, nodeLocations=DELETE, location="us-central1-a")
    assert budget(zonal) == []  # 24
    # No nodeLocations on the pool: the cluster's (regional: the full list).
    from_cluster = pool_of(0, 8, autoscaling={"maxNodeCount": 4}, nodeLocations=DELETE)
    cluster = standard_cluster(nodeLocations=["us-central1-a", "us-central1-b"])
    assert budget(from_cluster, extra=[(CLUSTER, "gke-cluster", cluster)]) == []  # 4 x 2 x 8 = 64


def test_budget_from_provider_state() -> None:
    """After an update a stack policy sees outputs: both maxima, the unused one 0."""
    per_zone = pool_of(0, 8, autoscaling={"maxNodeCount": 3, "totalMaxNodeCount": 0})
    one(budget(per_zone), rules.GPU_BUDGET, "72 GPUs", "3/zone x 3")
    total = pool_of(0, 8, autoscaling={"maxNodeCount": 0, "totalMaxNodeCount": 9})
    one(budget(total), rules.GPU_BUDGET, "72 GPUs")
    assert budget(pool_of(0, 8, autoscaling={"maxNodeCount": 0, "totalMaxNodeCount": 0})) == []


def test_pool_gpus_of_a_pool_whose_accelerators_are_unknown() -> None:
    pool = policy_resource(NODE_POOL, "p", gpu_pool(**{"nodeConfig.guestAccelerators": unknown("engine")}))
    assert rules.pool_gpus(pool, {}) == rules.PoolGpus("p", pool.urn, 4, None)


def test_budget_fixed_size_pool() -> None:
    fixed = pool_of(0, 8, autoscaling=DELETE, nodeCount=4)  # 4/zone x 3 zones x 8 = 96
    one(budget(fixed), rules.GPU_BUDGET, "96 GPUs", "fixed 4/zone x 3")
    seeded = pool_of(0, 8, autoscaling=DELETE, initialNodeCount=3)  # no nodeCount: the initial size
    one(budget(seeded), rules.GPU_BUDGET, "72 GPUs", "fixed 3/zone x 3")
    assert budget(pool_of(0, 8, autoscaling=DELETE)) == []  # size not known: cannot check


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_budget_unknowns(kind: str) -> None:
    # Unknown count: cannot check while the known pools fit ...
    assert (
        budget(pool_of(4, 1), pool_of(2, 1, **{"nodeConfig.guestAccelerators.0.count": unknown(kind)})) == []
    )
    assert budget(pool_of(4, 1), pool_of(2, 1, autoscaling=unknown(kind))) == []
    assert budget(pool_of(4, 1), pool_of(2, 1, **{"nodeConfig.guestAccelerators": unknown(kind)})) == []
    messages = budget(pool_of(9, 8), pool_of(2, 1, **{"nodeConfig.guestAccelerators": unknown(kind)}))
    one(messages, rules.GPU_BUDGET, "not counted: pool-1 (accelerators not known)")
    # ... but a known lower bound over the budget is a violation.
    messages = budget(pool_of(9, 8), pool_of(2, 1, **{"autoscaling.totalMaxNodeCount": unknown(kind)}))
    one(messages, rules.GPU_BUDGET, "72 GPUs at least", "not counted: pool-1 (")


def test_budget_no_gpu_pools() -> None:
    assert budget() == []


# --------------------------------------------------------------------------------------------------
# prod-gpu-not-all-spot (stack)


def spot_check(
    *pools: dict[str, Any], stack: str = "prod", config: dict[str, Any] | None = None
) -> list[str]:
    resources = [(NODE_POOL, f"pool-{i}", p) for i, p in enumerate(pools)]
    return violations(rules.validate_prod_not_all_spot, stack_args(resources, stack=stack, config=config))


SPOT = gpu_pool(**{"nodeConfig.spot": True})
PREEMPTIBLE = gpu_pool(**{"nodeConfig.spot": DELETE, "nodeConfig.preemptible": True})
ON_DEMAND = gpu_pool()


def test_prod_all_spot_is_a_violation() -> None:
    one(spot_check(SPOT, PREEMPTIBLE), rules.PROD_NOT_ALL_SPOT, "stack 'prod'", "pool-0, pool-1")


def test_prod_with_an_on_demand_pool() -> None:
    assert spot_check(SPOT, ON_DEMAND) == []
    assert spot_check(SPOT, gpu_pool(**{"nodeConfig.spot": DELETE})) == []  # spot defaults to false
    assert len(spot_check(SPOT, cpu_pool())) == 1  # a CPU pool is no GPU capacity


def test_non_prod_stacks_may_be_all_spot() -> None:
    assert spot_check(SPOT, stack="dev") == []


def test_all_spot_allowed_by_config() -> None:
    assert spot_check(SPOT, config={"allowAllSpot": True}) == []
    assert len(spot_check(SPOT, config={"allowAllSpot": False})) == 1


@pytest.mark.parametrize(
    ("pattern", "stack", "expected"),
    [
        ("prod", "eu-prod-2", 1),
        ("^prod$", "prod", 1),
        ("^prod$", "preprod", 0),
        ("^(production|live)", "live-eu", 1),
        ("^(production|live)", "prod", 0),
    ],
)
def test_prod_pattern_from_config(pattern: str, stack: str, expected: int) -> None:
    assert len(spot_check(SPOT, stack=stack, config={"prodStackPattern": pattern})) == expected


def test_invalid_prod_pattern_is_reported() -> None:
    one(
        spot_check(SPOT, config={"prodStackPattern": "(prod"}), rules.PROD_NOT_ALL_SPOT, "not a valid regular"
    )


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_prod_spot_unknown(kind: str) -> None:
    assert spot_check(SPOT, gpu_pool(**{"nodeConfig.spot": unknown(kind)})) == []
    # A pool whose accelerators are not known yet may be an on-demand GPU pool.
    assert spot_check(SPOT, gpu_pool(**{"nodeConfig": unknown(kind)})) == []
    assert spot_check(SPOT, gpu_pool(**{"nodeConfig.guestAccelerators": unknown(kind)})) == []


def test_prod_without_gpu_pools() -> None:
    assert spot_check(cpu_pool(**{"nodeConfig.spot": True})) == []


# --------------------------------------------------------------------------------------------------
# prod-cluster-deletion-protection


def test_prod_cluster_deletion_protection() -> None:
    validate = rules.validate_prod_deletion_protection
    assert check(validate, CLUSTER, standard_cluster()) == []
    # Unset: pulumi-gcp's default (true) applies, as the engine's post-Check inputs show.
    assert check(validate, CLUSTER, standard_cluster(deletionProtection=DELETE)) == []
    messages = check(validate, CLUSTER, standard_cluster(deletionProtection=False), name="gke-cluster")
    one(messages, rules.PROD_DELETION_PROTECTION, "cluster 'gke-cluster'", "False", "'prod'")


def test_deletion_protection_only_in_prod() -> None:
    unprotected = standard_cluster(deletionProtection=False)
    assert check(rules.validate_prod_deletion_protection, CLUSTER, unprotected, stack="dev") == []
    assert check(rules.validate_prod_deletion_protection, NODE_POOL, unprotected) == []
    config = {"prodStackPattern": "^live"}
    assert (
        check(rules.validate_prod_deletion_protection, CLUSTER, unprotected, stack="prod", config=config)
        == []
    )
    assert (
        len(
            check(
                rules.validate_prod_deletion_protection, CLUSTER, unprotected, stack="live-eu", config=config
            )
        )
        == 1
    )
    bad = {"prodStackPattern": "["}
    one(
        check(rules.validate_prod_deletion_protection, CLUSTER, unprotected, config=bad),
        rules.PROD_DELETION_PROTECTION,
        "not a valid",
    )


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_deletion_protection_unknown(kind: str) -> None:
    cluster = standard_cluster(deletionProtection=unknown(kind))
    assert check(rules.validate_prod_deletion_protection, CLUSTER, cluster) == []


# --------------------------------------------------------------------------------------------------
# node-dedicated-service-account


@pytest.mark.parametrize(
    ("resource_type", "resource_props"),
    [
        (NODE_POOL, gpu_pool()),
        (NODE_POOL, cpu_pool()),
        (CLUSTER, standard_cluster()),
        (CLUSTER, autopilot_cluster()),
    ],
)
def test_dedicated_service_account(resource_type: str, resource_props: dict[str, Any]) -> None:
    assert check(rules.validate_node_service_account, resource_type, resource_props) == []


@pytest.mark.parametrize(
    ("account", "fragment"),
    [
        (DELETE, "not set"),
        ("", "not set"),
        ("default", "'default'"),
        ("123456789012-compute@developer.gserviceaccount.com", "Compute Engine default"),
    ],
)
def test_default_service_account(account: Any, fragment: str) -> None:
    pool = gpu_pool(**{"nodeConfig.serviceAccount": account})
    messages = check(rules.validate_node_service_account, NODE_POOL, pool, name="gpu-l4-pool")
    one(
        messages, rules.NODE_SERVICE_ACCOUNT, "node pool 'gpu-l4-pool'", "nodeConfig.serviceAccount", fragment
    )
    cluster = standard_cluster(**{"nodeConfig.serviceAccount": account})
    one(check(rules.validate_node_service_account, CLUSTER, cluster), rules.NODE_SERVICE_ACCOUNT, fragment)


def test_service_account_of_autopilot_and_auto_provisioning() -> None:
    path = "clusterAutoscaling.autoProvisioningDefaults.serviceAccount"
    autopilot = autopilot_cluster(**{path: DELETE})
    one(check(rules.validate_node_service_account, CLUSTER, autopilot), rules.NODE_SERVICE_ACCOUNT, path)
    nap = standard_cluster(clusterAutoscaling={"enabled": True})
    one(check(rules.validate_node_service_account, CLUSTER, nap), rules.NODE_SERVICE_ACCOUNT, path)
    nap_ok = standard_cluster(**{"clusterAutoscaling.enabled": True, path: "nap@p.iam.gserviceaccount.com"})
    assert check(rules.validate_node_service_account, CLUSTER, nap_ok) == []
    assert check(rules.validate_node_service_account, CLUSTER, cpu_pool()) == []  # a pool is not a cluster


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_service_account_unknown(kind: str) -> None:
    # The program's own account: its email is computed, so a preview cannot check it (`up` can).
    assert (
        check(
            rules.validate_node_service_account,
            NODE_POOL,
            gpu_pool(**{"nodeConfig.serviceAccount": unknown(kind)}),
        )
        == []
    )
    assert check(rules.validate_node_service_account, NODE_POOL, gpu_pool(nodeConfig=unknown(kind))) == []
    path = "clusterAutoscaling.autoProvisioningDefaults.serviceAccount"
    assert (
        check(rules.validate_node_service_account, CLUSTER, autopilot_cluster(**{path: unknown(kind)})) == []
    )
    assert (
        check(rules.validate_node_service_account, CLUSTER, autopilot_cluster(enableAutopilot=unknown(kind)))
        == []
    )


# --------------------------------------------------------------------------------------------------
# node-workload-identity


def test_workload_identity_compliant() -> None:
    for resource_type, resource_props in [
        (NODE_POOL, gpu_pool()),
        (CLUSTER, standard_cluster()),
        (CLUSTER, autopilot_cluster()),
    ]:
        assert check(rules.validate_node_workload_identity, resource_type, resource_props) == []


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [(DELETE, "not set"), ("GCE_METADATA", "'GCE_METADATA'"), ("MODE_UNSPECIFIED", "'MODE_UNSPECIFIED'")],
)
def test_workload_metadata_mode(mode: Any, fragment: str) -> None:
    pool = gpu_pool(**{"nodeConfig.workloadMetadataConfig.mode": mode})
    messages = check(rules.validate_node_workload_identity, NODE_POOL, pool, name="gpu-l4-pool")
    one(
        messages,
        rules.NODE_WORKLOAD_IDENTITY,
        "'gpu-l4-pool'",
        "workloadMetadataConfig.mode is " + fragment,
        "GKE_METADATA",
    )
    cluster = standard_cluster(**{"nodeConfig.workloadMetadataConfig.mode": mode})
    one(
        check(rules.validate_node_workload_identity, CLUSTER, cluster), rules.NODE_WORKLOAD_IDENTITY, fragment
    )


def test_cluster_without_workload_identity() -> None:
    cluster = standard_cluster(workloadIdentityConfig=DELETE)
    one(
        check(rules.validate_node_workload_identity, CLUSTER, cluster),
        rules.NODE_WORKLOAD_IDENTITY,
        "workloadPool is not set",
    )
    # Autopilot always runs Workload Identity.
    assert check(rules.validate_node_workload_identity, CLUSTER, autopilot_cluster(nodeConfig={})) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_workload_identity_unknown(kind: str) -> None:
    for path in ("nodeConfig", "nodeConfig.workloadMetadataConfig", "nodeConfig.workloadMetadataConfig.mode"):
        assert (
            check(rules.validate_node_workload_identity, NODE_POOL, set_path(gpu_pool(), path, unknown(kind)))
            == []
        )
    cluster = standard_cluster(**{"workloadIdentityConfig.workloadPool": unknown(kind)})
    assert check(rules.validate_node_workload_identity, CLUSTER, cluster) == []


# --------------------------------------------------------------------------------------------------
# node-shielded-vm


def test_shielded_compliant() -> None:
    for resource_type, resource_props in [
        (NODE_POOL, gpu_pool()),
        (NODE_POOL, cpu_pool()),
        (CLUSTER, standard_cluster()),
        (CLUSTER, autopilot_cluster()),
    ]:
        assert check(rules.validate_node_shielded, resource_type, resource_props) == []
    # Integrity monitoring defaults to true.
    pool = gpu_pool(**{"nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring": DELETE})
    assert check(rules.validate_node_shielded, NODE_POOL, pool) == []


def test_shielded_nodes_off_is_accepted_only_on_a_bare_metal_cluster() -> None:
    """The program turns Shielded GKE Nodes off for A4X Max (bare metal) and labels the cluster so;
    an unlabelled cluster with it off is still a violation."""
    from gke_gpu.cluster.gke_cluster import BARE_METAL_LABEL as PROGRAMS_LABEL
    from policy.gke_gpu_policies.constants import BARE_METAL_LABEL

    assert BARE_METAL_LABEL == PROGRAMS_LABEL
    off = standard_cluster(enableShieldedNodes=False)
    one(
        check(rules.validate_node_shielded, CLUSTER, off), rules.NODE_SHIELDED, "enableShieldedNodes is false"
    )
    labelled = set_path(off, ("resourceLabels", BARE_METAL_LABEL), "true")
    assert check(rules.validate_node_shielded, CLUSTER, labelled) == []


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        ("nodeConfig.shieldedInstanceConfig.enableSecureBoot", False, "enableSecureBoot is false"),
        (
            "nodeConfig.shieldedInstanceConfig.enableSecureBoot",
            DELETE,
            "enableSecureBoot is not set (defaults to false)",
        ),
        ("nodeConfig.shieldedInstanceConfig", DELETE, "enableSecureBoot is not set"),
        (
            "nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring",
            False,
            "enableIntegrityMonitoring is false",
        ),
    ],
)
def test_shielded_off(path: str, value: Any, fragment: str) -> None:
    messages = check(
        rules.validate_node_shielded, NODE_POOL, set_path(gpu_pool(), path, value), name="gpu-l4-pool"
    )
    one(messages, rules.NODE_SHIELDED, "node pool 'gpu-l4-pool'", fragment)
    one(
        check(rules.validate_node_shielded, CLUSTER, set_path(standard_cluster(), path, value)),
        rules.NODE_SHIELDED,
        fragment,
    )


def test_cluster_without_shielded_nodes() -> None:
    one(
        check(rules.validate_node_shielded, CLUSTER, standard_cluster(enableShieldedNodes=False)),
        rules.NODE_SHIELDED,
        "enableShieldedNodes is false",
    )
    assert check(rules.validate_node_shielded, CLUSTER, standard_cluster(enableShieldedNodes=DELETE)) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_shielded_unknown(kind: str) -> None:
    for path in (
        "nodeConfig",
        "nodeConfig.shieldedInstanceConfig",
        "nodeConfig.shieldedInstanceConfig.enableSecureBoot",
    ):
        assert check(rules.validate_node_shielded, NODE_POOL, set_path(gpu_pool(), path, unknown(kind))) == []
    assert (
        check(rules.validate_node_shielded, CLUSTER, standard_cluster(enableShieldedNodes=unknown(kind)))
        == []
    )


# --------------------------------------------------------------------------------------------------
# gpu-workload-limits


@pytest.mark.parametrize("resource_type", WORKLOAD_TYPES)
def test_workload_limits_compliant_for_every_workload_type(resource_type: str) -> None:
    assert check(rules.validate_gpu_workload_limits, resource_type, workload(resource_type)) == []


@pytest.mark.parametrize(("limit", "gpu_request"), [("1", "1"), (2, 2), (2.0, "2"), (1, DELETE)])
def test_workload_whole_limits(limit: Any, gpu_request: Any) -> None:
    spec = set_path(set_path(gpu_pod_spec(), GPU_LIMIT, limit), GPU_REQUEST, gpu_request)
    assert check(rules.validate_gpu_workload_limits, JOB, workload(JOB, spec)) == []


@pytest.mark.parametrize("resource_type", WORKLOAD_TYPES)
@pytest.mark.parametrize("limit", ["0.5", "500m", 1.5, "one", -1, "-1"])
def test_workload_fractional_limit(resource_type: str, limit: Any) -> None:
    spec = set_path(set_path(gpu_pod_spec(), GPU_LIMIT, limit), GPU_REQUEST, DELETE)
    messages = check(
        rules.validate_gpu_workload_limits, resource_type, workload(resource_type, spec), name="job"
    )
    kind = resource_type.rsplit(":", 1)[-1]
    one(messages, rules.WORKLOAD_GPU_LIMITS, f"{kind} 'job' (gpu-samples/cuda-job)", "'cuda'", "integer")


def test_workload_request_without_limit() -> None:
    spec = set_path(gpu_pod_spec(), GPU_LIMIT, DELETE)
    one(
        check(rules.validate_gpu_workload_limits, JOB, workload(JOB, spec)),
        rules.WORKLOAD_GPU_LIMITS,
        "without a limit",
    )


def test_workload_request_not_equal_to_limit() -> None:
    spec = set_path(set_path(gpu_pod_spec(), GPU_LIMIT, "2"), GPU_REQUEST, "1")
    one(
        check(rules.validate_gpu_workload_limits, JOB, workload(JOB, spec)),
        rules.WORKLOAD_GPU_LIMITS,
        "requests '1'",
        "limit is '2'",
    )


def test_workload_init_containers_are_checked() -> None:
    init = {"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}
    spec = gpu_pod_spec(initContainers=[init])
    one(
        check(rules.validate_gpu_workload_limits, JOB, workload(JOB, spec)),
        rules.WORKLOAD_GPU_LIMITS,
        "initContainers[0] 'warmup'",
    )


def test_workload_without_gpus_or_not_a_workload() -> None:
    cpu_only = gpu_pod_spec(
        containers=[{"name": "web", "resources": {"limits": {"cpu": "1"}}}], tolerations=DELETE
    )
    assert check(rules.validate_gpu_workload_limits, JOB, workload(JOB, cpu_only)) == []
    assert check(rules.validate_gpu_workload_toleration, JOB, workload(JOB, cpu_only)) == []
    bad = set_path(gpu_pod_spec(), GPU_LIMIT, "0.5")
    for other in (
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:batch.volcano.sh/v1alpha1:Job",
        "kubernetes:apps/v1:DeploymentList",
    ):
        assert check(rules.validate_gpu_workload_limits, other, {"spec": {"template": {"spec": bad}}}) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
@pytest.mark.parametrize(
    "path",
    [
        GPU_LIMIT,
        ("containers", "0", "resources", "limits"),
        ("containers", "0", "resources"),
        ("containers", "0"),
        ("containers",),
    ],
)
def test_workload_limits_unknown(kind: str, path: tuple[str, ...]) -> None:
    spec = set_path(set_path(gpu_pod_spec(), GPU_REQUEST, "3"), path, unknown(kind))
    assert check(rules.validate_gpu_workload_limits, JOB, workload(JOB, spec)) == []
    assert (
        check(
            rules.validate_gpu_workload_limits, JOB, set_path(workload(JOB), "spec.template", unknown(kind))
        )
        == []
    )


# --------------------------------------------------------------------------------------------------
# gpu-workload-toleration


@pytest.mark.parametrize(
    "toleration",
    [
        GPU_TOLERATION,
        {"key": "nvidia.com/gpu", "operator": "Exists"},  # every effect
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present"},  # operator defaults to Equal
        {"operator": "Exists"},  # tolerates every taint
    ],
)
def test_toleration_present(toleration: dict[str, Any]) -> None:
    spec = gpu_pod_spec(tolerations=[{"key": "cloud.google.com/gke-spot", "operator": "Exists"}, toleration])
    assert check(rules.validate_gpu_workload_toleration, JOB, workload(JOB, spec)) == []


@pytest.mark.parametrize(
    "tolerations",
    [
        DELETE,
        [],
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}],
        [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
        [{"key": "cloud.google.com/gke-spot", "operator": "Exists", "effect": "NoSchedule"}],
    ],
)
@pytest.mark.parametrize("resource_type", WORKLOAD_TYPES)
def test_toleration_missing(resource_type: str, tolerations: Any) -> None:
    spec = gpu_pod_spec(tolerations=tolerations)
    messages = check(
        rules.validate_gpu_workload_toleration, resource_type, workload(resource_type, spec), name="job"
    )
    one(messages, rules.WORKLOAD_GPU_TOLERATION, "'job'", "containers[0] 'cuda'", "nvidia.com/gpu NoSchedule")


def test_toleration_needed_for_a_request_alone() -> None:
    spec = gpu_pod_spec(tolerations=DELETE)
    spec = set_path(spec, GPU_LIMIT, DELETE)
    assert len(check(rules.validate_gpu_workload_toleration, JOB, workload(JOB, spec))) == 1


def test_toleration_taint_value_from_config() -> None:
    equal_gpu = [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    job = workload(JOB, gpu_pod_spec(tolerations=equal_gpu))
    assert len(check(rules.validate_gpu_workload_toleration, JOB, job)) == 1
    assert check(rules.validate_gpu_workload_toleration, JOB, job, config={"taintValue": "gpu"}) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_toleration_unknown(kind: str) -> None:
    for path in ("tolerations", "tolerations.0", "tolerations.0.effect", "containers"):
        spec = set_path(
            gpu_pod_spec(tolerations=[{"key": "other", "operator": "Exists"}]), path, unknown(kind)
        )
        assert check(rules.validate_gpu_workload_toleration, JOB, workload(JOB, spec)) == []
    # A container whose limits are unknown may or may not ask for GPUs: no verdict.
    spec = set_path(gpu_pod_spec(tolerations=DELETE), ("containers", "0", "resources"), unknown(kind))
    assert check(rules.validate_gpu_workload_toleration, JOB, workload(JOB, spec)) == []


# --------------------------------------------------------------------------------------------------
# gpu-sharing-trusted-pool


@pytest.mark.parametrize("strategy", ["TIME_SHARING", "MPS"])
def test_sharing_on_a_trusted_pool(strategy: str) -> None:
    assert check(rules.validate_gpu_sharing_trusted, NODE_POOL, shared_pool(strategy)) == []


@pytest.mark.parametrize(("label", "found"), [(DELETE, "missing"), ("false", "'false'"), ("yes", "'yes'")])
@pytest.mark.parametrize("strategy", ["TIME_SHARING", "MPS"])
def test_sharing_on_an_untrusted_pool(strategy: str, label: Any, found: str) -> None:
    pool = shared_pool(strategy, **{f"nodeConfig.labels.{SHARING_TRUSTED_LABEL}": label})
    messages = check(rules.validate_gpu_sharing_trusted, NODE_POOL, pool, name="gpu-a100-pool")
    one(
        messages,
        rules.GPU_SHARING_TRUSTED,
        "'gpu-a100-pool'",
        strategy,
        f"{SHARING_TRUSTED_LABEL} is {found}",
    )


def test_no_sharing_needs_no_label() -> None:
    assert check(rules.validate_gpu_sharing_trusted, NODE_POOL, gpu_pool()) == []
    empty = gpu_pool(**{"nodeConfig.guestAccelerators.0.gpuSharingConfig": {}})
    assert check(rules.validate_gpu_sharing_trusted, NODE_POOL, empty) == []
    assert check(rules.validate_gpu_sharing_trusted, NODE_POOL, cpu_pool()) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
@pytest.mark.parametrize(
    "path",
    [
        f"nodeConfig.labels.{SHARING_TRUSTED_LABEL}",
        "nodeConfig.labels",
        "nodeConfig.guestAccelerators.0.gpuSharingConfig",
        "nodeConfig.guestAccelerators",
    ],
)
def test_sharing_unknown(kind: str, path: str) -> None:
    untrusted = shared_pool(**{f"nodeConfig.labels.{SHARING_TRUSTED_LABEL}": "false"})
    assert (
        check(rules.validate_gpu_sharing_trusted, NODE_POOL, set_path(untrusted, path, unknown(kind))) == []
    )


def test_sharing_strategy_unknown_is_still_sharing() -> None:
    changes: dict[str, Any] = {f"nodeConfig.labels.{SHARING_TRUSTED_LABEL}": DELETE}
    pool = shared_pool(**changes)
    pool = set_path(
        pool, "nodeConfig.guestAccelerators.0.gpuSharingConfig.gpuSharingStrategy", unknown("engine")
    )
    one(check(rules.validate_gpu_sharing_trusted, NODE_POOL, pool), rules.GPU_SHARING_TRUSTED, "(?)")


LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"


def _leader_worker_set(leader: dict[str, Any] | None, worker: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = {"size": 2, "workerTemplate": {"spec": worker}}
    if leader is not None:
        template["leaderTemplate"] = {"spec": leader}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "big", "namespace": "serve-big"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": template},
    }


def test_a_leader_worker_sets_two_templates_are_both_judged() -> None:
    fractional = set_path(gpu_pod_spec(), GPU_LIMIT, "0.5")
    untolerated = gpu_pod_spec(tolerations=[])
    assert (
        check(rules.validate_gpu_workload_limits, LWS, _leader_worker_set(gpu_pod_spec(), gpu_pod_spec()))
        == []
    )
    one(
        check(
            rules.validate_gpu_workload_limits,
            LWS,
            _leader_worker_set(fractional, gpu_pod_spec()),
            name="big",
        ),
        rules.WORKLOAD_GPU_LIMITS,
        "LeaderWorkerSet 'big' (serve-big/big), leader template",
    )
    one(
        check(rules.validate_gpu_workload_toleration, LWS, _leader_worker_set(None, untolerated), name="big"),
        rules.WORKLOAD_GPU_TOLERATION,
        "LeaderWorkerSet 'big' (serve-big/big), worker template",
    )
