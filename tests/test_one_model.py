"""One model per concept: where a stack file's section and a component's args name the same setting,
one model declares it (a base both inherit), so its type, bounds and default cannot drift apart. And
one definition per fact: a constant's value is written once in the library, and no Literal repeats
an enum's values."""

import ast
import functools
import inspect
from collections import defaultdict
from pathlib import Path

import pytest
from pydantic import BaseModel

from gke_gpu.cluster.args import GkeClusterSpec
from gke_gpu.cluster.model import ClusterConfig
from gke_gpu.gpu.compute_class import GpuComputeClassSpec
from gke_gpu.gpu.device_plugin import _NvidiaDevicePluginSpec
from gke_gpu.gpu.device_plugin_config import DevicePluginConfig
from gke_gpu.gpu.node_pool import GpuNodePoolSpec
from gke_gpu.gpu.pool import GpuPool
from gke_gpu.monitoring.gpu_monitoring import _GpuMonitoringSpec
from gke_gpu.monitoring.model import MonitoringConfig
from gke_gpu.network.model import NetworkConfig
from gke_gpu.network.vpc import _GkeNetworkSpec
from gke_gpu.serving.inference_service import InferenceServiceSpec
from gke_gpu.serving.model import ServingConfig

# Settings both name but each side must declare itself, with the reason. The monitoring section leaves
# `dcgm` and `dashboard` unset to take the cluster kind's default (the component needs them decided),
# and its `alerts` adds `enabled` to the one alert-policy model the component takes (AlertPolicyConfig).
# The cluster section's name and location are optional (the stack defaults them to <project>-<stack>
# and the region); GkeCluster needs them. The GPU pool's specs narrow the pool's fields that a
# component needs decided: the GPU count, and for a node pool its name and node limit.
DECLARED_TWICE = {
    (ClusterConfig, GkeClusterSpec): {"name", "location"},
    (MonitoringConfig, _GpuMonitoringSpec): {"dcgm", "dashboard", "alerts"},
    (GpuPool, GpuNodePoolSpec): {"name", "gpus_per_node", "max_nodes"},
    (GpuPool, GpuComputeClassSpec): {"gpus_per_node"},
    # A service's name: the stack file's entry and the component each name it (the component defaults
    # it to the resource name); the stack file's replicas are a range, the component's a count.
    (ServingConfig, InferenceServiceSpec): {"name", "replicas"},
}


def _declared_once(section: type[BaseModel], spec: type[BaseModel], field: str) -> bool:
    """Exactly one class of either model's hierarchy annotates the field, and both models inherit it."""
    classes = set(section.__mro__) | set(spec.__mro__)
    declarers = [c for c in classes if field in inspect.get_annotations(c)]
    return len(declarers) == 1 and issubclass(section, declarers[0]) and issubclass(spec, declarers[0])


@pytest.mark.parametrize(
    ("section", "spec"),
    [
        (ClusterConfig, GkeClusterSpec),
        (NetworkConfig, _GkeNetworkSpec),
        (DevicePluginConfig, _NvidiaDevicePluginSpec),
        (MonitoringConfig, _GpuMonitoringSpec),
        (GpuPool, GpuNodePoolSpec),
        (GpuPool, GpuComputeClassSpec),
        (ServingConfig, InferenceServiceSpec),
    ],
    ids=lambda model: model.__name__,
)
def test_a_setting_both_name_is_declared_once(section: type[BaseModel], spec: type[BaseModel]) -> None:
    allowed = DECLARED_TWICE.get((section, spec), set())
    both = set(section.model_fields) & set(spec.model_fields)
    twice = {f for f in both if not _declared_once(section, spec, f)}
    assert twice == allowed, f"declared on each side: {sorted(twice - allowed)}; allowed: {sorted(allowed)}"


LIBRARY = Path(__file__).resolve().parent.parent / "components"
# The library's modules (the scripts the Pods run are no part of it: they import nothing of it).
MODULES = sorted(p for p in LIBRARY.rglob("*.py") if "scripts" not in p.relative_to(LIBRARY).parts)

# Constants of one value that are different facts, each free to change alone: the project's name as
# the stack file's namespace, a label value, the Pulumi package and a Prometheus rule group; the
# Kubernetes managed-by value and the engine's config namespace; two rate windows; a service account
# and a container that are both named after vLLM.
SAME_VALUE = {
    "gke-gpu": {
        "core/common.py:NAMESPACE",
        "core/k8s.py:PART_OF",
        "core/package.py:PACKAGE",
        "monitoring/alert_rules.py:RULE_GROUP",
    },
    "pulumi": {"core/k8s.py:MANAGED_BY", "stack/keys.py:ENGINE_NAMESPACE"},
    "5m": {"monitoring/alert_rules.py:BACKLOG_WINDOW", "monitoring/dashboard_serving.py:WINDOW"},
    "vllm": {"serving/server_pod.py:KSA", "serving/server_parts.py:CONTAINER"},
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once per test process (the tests here only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def test_a_constants_value_is_written_once() -> None:
    """A module-level UPPER_CASE string constant's value is assigned in one place; other modules import
    it (a label key, a host path, an API version, a GKE version written twice drift apart)."""
    places: dict[str, set[str]] = defaultdict(set)
    for path in MODULES:
        for node in _tree(path).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            value = getattr(node, "value", None)
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper():
                    places[value.value].add(f"{path.relative_to(LIBRARY)}:{target.id}")
    twice = {value: where for value, where in places.items() if len(where) > 1}
    assert twice == SAME_VALUE


def _enum_values() -> dict[str, frozenset[str]]:
    found = {}
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "StrEnum" for b in node.bases):
                values = [
                    n.value.value
                    for n in node.body
                    if isinstance(n, ast.Assign)
                    and isinstance(n.value, ast.Constant)
                    and isinstance(n.value.value, str)
                ]
                found[node.name] = frozenset(values)
    return found


def test_no_literal_repeats_an_enums_values() -> None:
    """A field that takes an enum's values says so (`enum_values(TheEnum)`, or a Literal built from it),
    never by writing them out again."""
    enums = _enum_values()
    assert {"DcgmFlavor", "SampleKind"} <= set(enums), "the walk finds the enums"
    repeats = []
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal"):
                continue
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            written = {p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)}
            repeats += [
                f"{path.relative_to(LIBRARY)}:{node.lineno} repeats {name}"
                for name, values in enums.items()
                if len(values) > 1 and values <= written
            ]
    assert repeats == []
