"""Every rule runs once per render, and every component's args are validated once.

The stack layer runs the section rules on the stack file (the pool rules on each `gpuPools` entry,
the cluster, network, monitoring, batch and serving rules the components share with it); the
components whose section it checked get their args' model validated once (check_components), not
their rules again (`declare(..., section_checked=True)`, stack/declare.py), and a GPU pool component
gets its pool as it was checked (CheckedArgs). A program of one's own that declares a component with
plain args gets its full check there, once; the fuzz tests (test_fuzz_stack_components.py) run the
components' full rules on what the stack rules accept.

The counters wrap each shared rule function under every name it is looked up by (each module that
imported it), and validate_args and validate_named_args likewise (core/component.py and gpu/rules.py
import them directly); a validation nested in another (validate_named_args calls validate_args)
counts once.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import gke_gpu
from gke_gpu.cluster import maintenance
from gke_gpu.cluster import rules as cluster_rules
from gke_gpu.core import image_digests, validation
from gke_gpu.gpu.rules import GpuPoolRules
from gke_gpu.gpudirect import flavors
from gke_gpu.monitoring import dcgm_exporter_args
from gke_gpu.monitoring import rules as monitoring_rules
from gke_gpu.network import rules as network_rules
from gke_gpu.serving import fit, pd_rules, pool_rules
from gke_gpu.serving import rules as serving_rules
from gke_gpu.workloads import batch_teams, training_data_rules
from tests.conftest import AUTOPILOT_CLUSTER, STANDARD_CLUSTER, render, settings, stack_config

# The rule functions that a domain's section rules (`<domain>/section.py`) and a component's rules both
# call (or, for check_exporter, two components: GpuMonitoring and DcgmExporter). Every rule follows the
# one contract (docs/architecture.md, "One contract"): `check_<what>(..., problems)`;
# test_the_shared_rules_are_all_listed holds this list complete.
SHARED_RULES: list[Callable[..., Any]] = [
    cluster_rules.check_nodes,
    cluster_rules.check_private_nodes,
    cluster_rules.check_public_endpoint_networks,
    network_rules.check_ranges,
    network_rules.check_proxy_only_range,
    monitoring_rules.check_xid_errors,
    monitoring_rules.check_notification_channels,
    dcgm_exporter_args.check_exporter,
    serving_rules.check_model_server,
    serving_rules.check_replica_nodes,
    fit.check_model,
    pool_rules.check_pool,
    pool_rules.check_weights_cache,
    pd_rules.check_disaggregation,
    batch_teams.check_team_names,
    batch_teams.check_queue_names,
    batch_teams.check_shares,
    batch_teams.check_members,
    batch_teams.check_egress,
    flavors.check_gpudirect_cidr,
    maintenance.check_maintenance,
    training_data_rules.check_volumes,
    image_digests.check_digests,
]
# At most once per service: a service's model, its cache, its roles.
PER_SERVICE = {"check_model", "check_weights_cache", "check_disaggregation"}
# What the pool offers one Pod: once per service, once per role of a disaggregated one.
PER_POD_SHAPE = {"check_pool"}
# Once per team: a team's members and egress.
PER_TEAM = {"check_members", "check_egress", "check_volumes"}
# Once per render: each of these judges the stack's one cluster, network, monitoring or batch section.
PER_RENDER = {f.__name__ for f in SHARED_RULES} - {
    "check_model_server",
    "check_replica_nodes",
    *PER_SERVICE,
    *PER_POD_SHAPE,
    *PER_TEAM,
}
# Every example stack but the fleet, whose rules run once per cluster (the manager and each worker).
EXAMPLE_STACKS = ["dev", "prod", "onprem", "train", "serve", "pd", "dra", "nvl72"]


def _modules() -> Iterator[Any]:
    """Every module of the library, imported (the stacks' lazily imported ones too)."""
    for info in pkgutil.walk_packages(gke_gpu.__path__, f"{gke_gpu.__name__}."):
        yield importlib.import_module(info.name)


def _patch_everywhere(monkeypatch: pytest.MonkeyPatch, original: Any, wrapper: Any) -> None:
    """Replace `original` under every name a library module looks it up by."""
    for module in list(_modules()):
        for attribute, value in list(vars(module).items()):
            if value is original:
                monkeypatch.setattr(module, attribute, wrapper)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each shared rule ran, by name; GpuPoolRules.check as `pool:<name>`, one per pool."""
    seen: Counter[str] = Counter()

    def counting(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[function.__name__] += 1
            return function(*args, **kwargs)

        return wrapper

    for function in SHARED_RULES:
        _patch_everywhere(monkeypatch, function, counting(function))
    check = GpuPoolRules.check

    def counting_check(self: GpuPoolRules, pool: Any, path: str = "") -> Any:
        seen[f"pool:{pool.name}"] += 1
        return check(self, pool, path)

    monkeypatch.setattr(GpuPoolRules, "check", counting_check)
    return seen


@pytest.fixture
def validated(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, str]]:
    """How often each component's args were validated, by (component, resource name)."""
    seen: Counter[tuple[str, str]] = Counter()
    depth = [0]

    def counting(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(component: str, name: str, *args: Any, **kwargs: Any) -> Any:
            if not depth[0]:
                seen[(component, name)] += 1
            depth[0] += 1
            try:
                return function(component, name, *args, **kwargs)
            finally:
                depth[0] -= 1

        return wrapper

    for function in (validation.validate_args, validation.validate_named_args):
        _patch_everywhere(monkeypatch, function, counting(function))
    return seen


def _twice(counts: Counter[Any]) -> dict[Any, int]:
    return {key: n for key, n in counts.items() if n > 1}


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The Settings each render resolved from its stack file."""
    from gke_gpu.stack import config

    seen: list[Any] = []
    load = config.load_settings

    def recording() -> Any:
        seen.append(load())
        return seen[-1]

    monkeypatch.setattr(config, "load_settings", recording)
    return seen


def assert_once_per_render(calls: Counter[str], validated: Counter[tuple[str, str]], resolved: Any) -> None:
    pools = {f"pool:{p.name}" for p in resolved.gpu_pools}
    assert {k: n for k, n in calls.items() if k.startswith("pool:")} == dict.fromkeys(pools, 1), calls
    assert {k: n for k, n in calls.items() if k in PER_RENDER and n > 1} == {}, calls
    assert calls["check_model_server"] == len(resolved.serving), calls
    assert calls["check_replica_nodes"] <= len(resolved.serving), calls
    assert all(calls[rule] <= len(resolved.batch.teams) for rule in PER_TEAM), calls
    assert all(calls[rule] <= len(resolved.serving) for rule in PER_SERVICE), calls
    shapes = sum(2 if service.disaggregation else 1 for service in resolved.serving)
    assert all(calls[rule] <= shapes for rule in PER_POD_SHAPE), calls
    if resolved.cluster.mode != "existing":
        assert calls["check_nodes"] == calls["check_private_nodes"] == calls["check_ranges"] == 1, calls
    assert validated, "the stack declares components that validate their args"
    assert {k: n for k, n in validated.items() if n > 1} == {}, validated
    # GpuMonitoring's model holds its exporter's args: DcgmExporter takes them as checked there.
    assert [k for k in validated if k[0] == "DcgmExporter"] == [], validated


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_each_rule_and_each_components_args_once_per_render_of_an_example_stack(
    stack: str, calls: Counter[str], validated: Counter[tuple[str, str]], resolved: list[Any]
) -> None:
    from tools.offline import run_stack

    result = run_stack(stack)
    assert result.error is None, result.error
    assert_once_per_render(calls, validated, resolved[-1])


STANDARD_POOLS = [
    {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2},
    {"name": "t4", "accelerator": "nvidia-tesla-t4", "gpusPerNode": 2, "maxNodes": 1, "spot": True},
    {"name": "a100", "accelerator": "nvidia-tesla-a100", "migPartitionSize": "1g.5gb", "maxNodes": 1},
]
AUTOPILOT_PROFILES = [
    {"name": "l4", "accelerator": "nvidia-l4", "spot": True},
    {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "spot": True},
]
CHANNELS = ["projects/test-project/notificationChannels/1"]
L4 = {"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 2, "maxNodes": 4, "driverVersion": "LATEST"}
H100 = {
    "name": "h100",
    "accelerator": "nvidia-h100-80gb",
    "gpusPerNode": 8,
    "maxNodes": 4,
    "driverVersion": "LATEST",
}
MODEL = "gs://models-bucket/qwen2.5-1.5b-instruct"
TARGETED = {
    # Standard pools, the DCGM exporter with XID alerts, a public endpoint for one network.
    "standard-exporter-alerts": stack_config(
        cluster={
            **STANDARD_CLUSTER,
            "publicEndpoint": True,
            "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayName": "vpn"}],
        },
        gpuPools=STANDARD_POOLS,
        monitoring={"dcgm": "exporter", "alerts": {"enabled": True, "notificationChannels": CHANNELS}},
    ),
    "autopilot-alerts": stack_config(
        cluster=AUTOPILOT_CLUSTER,
        gpuPools=AUTOPILOT_PROFILES,
        monitoring={"alerts": {"enabled": True, "notificationChannels": CHANNELS}},
    ),
    # Teams with members, egress and a bucket of training data on Kueue's queues; the exporter's image
    # pinned by digest.
    "teams-data-digests": stack_config(
        cluster={**STANDARD_CLUSTER, "rbacSecurityGroup": "gke-security-groups@example.com"},
        gpuPools=[L4],
        monitoring={"dcgm": "exporter"},
        images={"digests": {"nvcr.io/nvidia/k8s/dcgm-exporter": "sha256:" + "a" * 64}},
        batch={
            "kueue": True,
            "teams": [
                {
                    "name": "vision",
                    "pools": {"l4": {"gpus": 4}},
                    "members": ["user:ada@example.com", "group:vision@example.com"],
                    "egress": [{"cidr": "10.0.0.0/8", "ports": [443]}],
                    "data": [{"name": "training", "gcs": {"bucket": "research-training-data"}}],
                },
                {"name": "speech", "pools": {"l4": {"gpus": 4}}},
            ],
        },
    ),
    # Two services, one behind the Inference Gateway (the proxy-only range), one over two nodes.
    "serving-gateway-multi-node": stack_config(
        cluster=STANDARD_CLUSTER,
        gpuPools=[L4, H100],
        serving=[
            {"name": "chat", "pool": "l4", "model": MODEL, "gateway": True},
            {"name": "big", "pool": "h100", "model": MODEL, "gpusPerReplica": 16},
        ],
    ),
}


@pytest.mark.parametrize("name", list(TARGETED))
def test_each_rule_and_each_components_args_once_per_render_of_a_targeted_stack(
    name: str, calls: Counter[str], validated: Counter[tuple[str, str]], resolved: list[Any]
) -> None:
    render(TARGETED[name])
    assert_once_per_render(calls, validated, resolved[-1])
    if name == "serving-gateway-multi-node":
        assert calls["check_proxy_only_range"] == calls["check_replica_nodes"] == 1, calls


def test_a_program_of_its_own_gets_each_rule_once_at_the_boundary(
    calls: Counter[str], validated: Counter[tuple[str, str]]
) -> None:
    """Plain args: each component checks them, rules included, once; GpuMonitoring hands its exporter
    the exporter's args as it checked them (DcgmExporter does not check them again)."""
    from gke_gpu.cluster.gke_cluster import GkeCluster
    from gke_gpu.monitoring.gpu_monitoring import GpuMonitoring
    from gke_gpu.network.vpc import GkeNetwork
    from tools.offline import run_program

    def program() -> None:
        GkeNetwork("net", {"project": "p-123456", "region": "us-central1", "name_prefix": "c"})
        GkeCluster(
            "gke",
            {
                "project": "p-123456",
                "name": "c",
                "location": "us-central1",
                "autopilot": False,
                "network": "net",
                "subnetwork": "subnet",
                "pods_range_name": "pods",
                "services_range_name": "services",
            },
        )
        GpuMonitoring(
            "mon",
            {
                "dcgm": "exporter",  # type: ignore[typeddict-item]
                "project": "p-123456",
                "cluster_name": "c",
                "exporter": {"flavor": "gke", "scraper_namespace": "gmp-system"},  # type: ignore[typeddict-item]
                "alerts": {"notification_channels": ["projects/p-123456/notificationChannels/1"]},
            },
        )

    result = run_program({}, program=program)
    assert result.error is None, result.error
    assert dict(validated) == {
        ("GkeNetwork", "net"): 1,
        ("GkeCluster", "gke"): 1,
        ("GpuMonitoring", "mon"): 1,
    }
    for rule in (
        "check_ranges",
        "check_nodes",
        "check_private_nodes",
        "check_exporter",
        "check_xid_errors",
    ):
        assert calls[rule] == 1, calls


def test_the_fuzz_tests_check_still_runs_the_components_rules(calls: Counter[str]) -> None:
    """check_components(component_rules=True), the fuzz tests' (test_fuzz_stack_components.py), runs
    the rules a render leaves to the stack layer: the agreement they guard is still checked."""
    from gke_gpu.stack.program import check_components
    from tools.offline import run_program

    raw = {
        "cluster": STANDARD_CLUSTER,
        "gpuPools": [L4],
        "monitoring": {"alerts": {"enabled": True, "notificationChannels": CHANNELS}},
        "serving": [{"name": "chat", "pool": "l4", "model": MODEL}],
    }
    resolved = settings(raw)  # the stack rules, once
    rules = ("check_nodes", "check_ranges", "check_xid_errors", "check_model_server")
    assert [calls[rule] for rule in rules] == [1, 1, 1, 1], calls
    for component_rules, runs in ((False, 0), (True, 1)):
        calls.clear()
        check = functools.partial(check_components, resolved, component_rules=component_rules)
        result = run_program({}, program=check)
        assert result.error is None, result.error
        assert [calls[rule] for rule in rules] == [runs] * len(rules), (component_rules, calls)


def _shared_rule_names() -> set[str]:
    """The `check_*` functions of the domains that a domain's section rules and a component module both
    import (read from their source): the rules a render could run twice."""
    import ast
    from pathlib import Path

    library = Path(gke_gpu.__file__).parent

    def imported(path: Path) -> set[str]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.name.startswith("check_")
        }

    sections = set().union(*(imported(p) for p in library.glob("*/*section.py")))
    others = [
        p
        for p in library.glob("*/*.py")
        if p.parent.name not in ("core", "stack") and not p.stem.endswith(("section", "plan"))
    ]
    components = set().union(*(imported(p) for p in others))
    return sections & components


def test_the_shared_rules_are_all_listed() -> None:
    """Every rule a section and a component share is counted here, named by the one contract."""
    listed = {f.__name__ for f in SHARED_RULES}
    assert _shared_rule_names() <= listed, _shared_rule_names() - listed
    assert all(name.startswith("check_") for name in listed)
