"""Every converted component reads its args as a dict and checks them at the boundary, before it
declares anything: unknown keys, whole numbers (2.0 as 2, never 2.5), enum values and the rules of
each component are refused by arg path, and nothing is registered, not even the component."""

from collections.abc import Callable
from typing import Any, get_type_hints

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gke_gpu.cluster import existing as existing_cluster
from gke_gpu.cluster import gke_cluster as cluster
from gke_gpu.core import component as component_base
from gke_gpu.core.component import GkeGpuComponent
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpu import device_plugin as nvidia_device_plugin
from gke_gpu.gpu import node_labels as gpu_node_labels
from gke_gpu.monitoring import dcgm_exporter, gpu_monitoring
from gke_gpu.monitoring.dcgm_exporter_args import DcgmExporterArgs, DcgmExporterSettings, ScrapeMode
from gke_gpu.network import vpc as network
from gke_gpu.workloads import samples as sample_workloads
from tests.conftest import cluster_args
from tools.offline import RunResult, run_program

NAME = "checked"
PROJECT = "p-123456"

NETWORK = {
    "project": PROJECT,
    "region": "us-central1",
    "name_prefix": "gpu",
    "subnet_cidr": "10.0.0.0/20",
    "pods_cidr": "10.4.0.0/14",
    "services_cidr": "10.8.0.0/20",
}
CLUSTER = cluster_args(project=PROJECT)
EXPORTER = {"flavor": "gke", "scraper_namespace": "gmp-system"}
MONITORING = {"project": PROJECT, "cluster_name": "gpu", "dcgm": "managed"}
PLUGIN = {"node_selector": {"nvidia.com/gpu.present": "true"}}
TARGET = {
    "name": "l4",
    "accelerator": "nvidia-l4",
    "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
}
SAMPLES = {"workloads": [{"kind": "nvidia-smi", "target": TARGET}]}
LABELS = {"nodes": ["gpu-1"], "label_key": "gpus", "label_value": "true"}
EXISTING = {"kubeconfig": "apiVersion: v1\nkind: Config"}

# Class, its module (where validate_args is looked up), valid minimal args, Kubernetes-layer.
COMPONENTS: dict[str, tuple[Callable[..., pulumi.ComponentResource], Any, dict[str, Any], bool]] = {
    "GkeNetwork": (network.GkeNetwork, network, NETWORK, False),
    "GkeCluster": (cluster.GkeCluster, cluster, CLUSTER, False),
    "GpuMonitoring": (gpu_monitoring.GpuMonitoring, gpu_monitoring, MONITORING, True),
    "DcgmExporter": (dcgm_exporter.DcgmExporter, dcgm_exporter, EXPORTER, True),
    "NvidiaDevicePlugin": (nvidia_device_plugin.NvidiaDevicePlugin, nvidia_device_plugin, PLUGIN, True),
    "SampleWorkloads": (sample_workloads.SampleWorkloads, sample_workloads, SAMPLES, True),
    "ExistingCluster": (existing_cluster.ExistingCluster, existing_cluster, EXISTING, False),
    "GpuNodeLabels": (gpu_node_labels.GpuNodeLabels, gpu_node_labels, LABELS, True),
}


def construct(component: str, args: Any) -> RunResult:
    """Declare the component alone under mocks; `args` may be a function that makes them there (an
    Output needs the program's event loop)."""
    cls, _, _, kubernetes = COMPONENTS[component]

    def program() -> None:
        opts = None
        if kubernetes:
            opts = pulumi.ResourceOptions(provider=k8s.Provider("k8s", kubeconfig="apiVersion: v1"))
        cls(NAME, args() if callable(args) else args, opts=opts)

    return run_program({}, program=program)


def refused(component: str, args: Any) -> list[str]:
    """The problems of an InvalidArgsError; fails unless nothing of the component was declared."""
    result = construct(component, args)
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    assert result.error.component == component and result.error.resource_name == NAME
    assert [r.name for r in result.resources if r.name.startswith(NAME)] == [], "declared before the check"
    return result.error.problems


def with_value(args: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `args` with `path` (`a.b[0].c`) set to `value`."""
    copy = yaml.safe_load(yaml.safe_dump(args))
    *parents, last = path.replace("[", ".[").split(".")
    target: Any = copy
    for part in parents:
        key: Any = int(part[1:-1]) if part.startswith("[") else part
        target = target[key]
    target[int(last[1:-1]) if last.startswith("[") else last] = value
    return copy


def spy(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Any]:
    """The checked model each call of `validate_args` returned for a component of `module` (the
    components' one base, core/component.py, makes the call)."""
    assert issubclass(next(v for v in vars(module).values() if _is_component(v, module)), GkeGpuComponent)
    module = component_base
    seen: list[Any] = []
    original = module.validate_args

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(original(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(module, "validate_args", recording)
    return seen


def _is_component(value: Any, module: Any) -> bool:
    return (
        isinstance(value, type)
        and issubclass(value, pulumi.ComponentResource)
        and value.__module__ == module.__name__
    )


# -- every component -------------------------------------------------------------------------------


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_a_dict_of_args_declares_the_component(component: str) -> None:
    result = construct(component, COMPONENTS[component][2])
    assert result.error is None, result.error
    (me,) = [r for r in result.resources if r.name == NAME]
    assert me.type == f"gke-gpu:index:{component}"
    assert result.children_of(me), "the component declares its children"


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_an_unknown_key_is_refused_by_name_and_nothing_is_declared(component: str) -> None:
    (problem,) = refused(component, {**COMPONENTS[component][2], "colour": "red"})
    assert problem.startswith("colour: unknown key; allowed keys here: ")


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_args_that_are_not_a_dict_are_refused(component: str) -> None:
    assert refused(component, None) == ["args: null is not allowed; expected a dict"]


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_every_missing_required_key_is_named(component: str) -> None:
    required = _required_keys(component)
    assert required <= set(COMPONENTS[component][2]), "the minimal args have every required key"
    problems = refused(component, {})
    assert sorted(problems) == [f"{key}: required" for key in sorted(required)]


def _required_keys(component: str) -> frozenset[str]:
    cls = COMPONENTS[component][0]
    args_type = get_type_hints(cls.__init__)["args"]
    return args_type.__required_keys__


# Whole-number args: (component, arg path, base args the path exists in, a valid whole number).
WHOLE_NUMBERS = [
    ("GkeCluster", "system_pool.min_nodes", {**CLUSTER, "system_pool": {"min_nodes": 1}}, 2),
    ("GpuMonitoring", "alerts.idle_gpu_minutes", {**MONITORING, "alerts": {"idle_gpu_minutes": 60}}, 30),
    (
        "DcgmExporter",
        "tolerations[0].toleration_seconds",
        {**EXPORTER, "tolerations": [{"key": "k", "effect": "NoExecute", "toleration_seconds": 1}]},
        2,
    ),
    ("NvidiaDevicePlugin", "time_slicing_replicas", {**PLUGIN, "time_slicing_replicas": 2}, 2),
    ("SampleWorkloads", "workloads[0].target.gpus_per_pod", SAMPLES, 2),
]


@pytest.mark.parametrize(
    ("component", "path", "base", "whole"), WHOLE_NUMBERS, ids=[w[0] for w in WHOLE_NUMBERS]
)
def test_a_whole_float_is_an_int_and_a_fraction_is_refused(
    component: str, path: str, base: dict[str, Any], whole: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through the provider every number arrives as a float (protobuf Struct).
    seen = spy(monkeypatch, COMPONENTS[component][1])
    result = construct(component, with_value(base, path, float(whole)))
    assert result.error is None, result.error
    value = _at(seen[0], path)
    assert value == whole and type(value) is int
    (problem,) = refused(component, with_value(base, path, whole + 0.5))
    assert problem == f"{path}: {whole + 0.5} is not allowed; expected a whole number"


def _at(model: Any, path: str) -> Any:
    for part in path.replace("[", ".[").split("."):
        model = model[int(part[1:-1])] if part.startswith("[") else getattr(model, part)
    return model


# Enum args: (component, arg path, base args).
ENUMS = [
    ("GkeCluster", "release_channel", CLUSTER),
    ("GkeCluster", "kubeconfig_endpoint", CLUSTER),
    ("GpuMonitoring", "dcgm", MONITORING),
    ("DcgmExporter", "flavor", EXPORTER),
    ("DcgmExporter", "scrape", EXPORTER),
    (
        "DcgmExporter",
        "tolerations[0].effect",
        {**EXPORTER, "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]},
    ),
    ("SampleWorkloads", "workloads[0].kind", SAMPLES),
    ("SampleWorkloads", "workloads[0].target.sharing", SAMPLES),
]


@pytest.mark.parametrize(("component", "path", "base"), ENUMS, ids=[f"{e[0]}-{e[1]}" for e in ENUMS])
def test_a_value_outside_an_enum_is_refused_by_name(component: str, path: str, base: dict[str, Any]) -> None:
    (problem,) = refused(component, with_value(base, path, "NIGHTLY"))
    assert problem.startswith(f"{path}: 'NIGHTLY' is not allowed; allowed: "), problem


def test_enum_members_and_their_values_are_the_same_arg(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spy(monkeypatch, dcgm_exporter)
    for scrape in (ScrapeMode.SERVICE_MONITOR, "serviceMonitor"):
        result = construct("DcgmExporter", {**EXPORTER, "scrape": scrape})
        assert result.error is None, result.error
        assert result.one("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
    assert [s.scrape for s in seen] == ["serviceMonitor", "serviceMonitor"]


def test_an_output_passes_unchecked_where_the_arg_is_an_input() -> None:
    def program() -> None:
        region = pulumi.Output.from_input("us-east4")
        network.GkeNetwork(NAME, {**NETWORK, "region": region, "project": pulumi.Output.secret(PROJECT)})

    result = run_program({}, program=program)
    assert result.error is None, result.error
    assert result.one("gcp:compute/subnetwork:Subnetwork").inputs["region"] == "us-east4"


def test_an_output_is_refused_where_the_component_branches_on_the_arg() -> None:
    (problem,) = refused("GkeNetwork", lambda: {**NETWORK, "cloud_nat": pulumi.Output.from_input(True)})
    assert problem == "cloud_nat: <output> is not allowed; expected true or false"


def test_every_problem_is_reported_at_once() -> None:
    args = {**CLUSTER, "name": "GPU", "release_channel": "NIGHTLY", "system_pool": {"spot": "yes"}}
    assert refused("GkeCluster", args) == [
        "name: 'GPU' is not allowed: expected a GKE cluster name: lowercase letters, digits and hyphens, "
        "starting with a letter",
        "release_channel: 'NIGHTLY' is not allowed; allowed: 'RAPID', 'REGULAR', 'STABLE' or 'EXTENDED'",
        "system_pool.spot: 'yes' is not allowed; expected true or false",
    ]


# -- each component's own rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"pods_cidr": "10.0.8.0/21"}, "pods_cidr: 10.0.8.0/21 overlaps subnet_cidr 10.0.0.0/20"),
        ({"subnet_cidr": "10.0.0.1/20"}, "subnet_cidr: '10.0.0.1/20' is not an IPv4 CIDR block"),
        ({"subnet_cidr": "10.0.0.0/30"}, "subnet_cidr: 10.0.0.0/30 is too small"),
        ({"pods_cidr": "10.4.0.0/25"}, "pods_cidr: 10.4.0.0/25 is too small"),
        ({"flow_log_sampling": 1.5}, "flow_log_sampling: 1.5 is not allowed; must be <= 1"),
        ({"name_prefix": "a" * 57}, "name_prefix: "),
        ({"project": "P"}, "project: 'P' is not allowed: expected a GCP project ID"),
    ],
)
def test_network_rules(args: dict[str, Any], expected: str) -> None:
    problems = refused("GkeNetwork", {**NETWORK, **args})
    assert any(p.startswith(expected) for p in problems), problems


def test_network_flow_logs_take_a_whole_number_as_a_fraction() -> None:
    result = construct("GkeNetwork", {**NETWORK, "flow_log_sampling": 1})
    assert result.error is None, result.error
    assert result.one("gcp:compute/subnetwork:Subnetwork").inputs["logConfig"]["flowSampling"] == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"private_nodes": False}, "private_nodes: false needs public_endpoint: true"),
        (
            {"autopilot": True, "system_pool": {}},
            "system_pool: not allowed with autopilot: true: Autopilot manages",
        ),
        (
            {"autopilot": True, "intranode_visibility": True},
            "intranode_visibility: not allowed with autopilot: true",
        ),
        ({"autopilot": True, "location": "us-central1-a"}, "location: 'us-central1-a' is a zone"),
        (
            {"system_pool": {"min_nodes": 4}},
            "system_pool.min_nodes: 4 is greater than system_pool.max_nodes 3",
        ),
        (
            {"system_pool": {"max_nodes": 2}},
            "system_pool.max_nodes: 2 is too small: the system pool of a regional",
        ),
        (
            {"authorized_networks": [{"cidr_block": "203.0.113.1/24"}]},
            "authorized_networks[0].cidr_block: '203.0.113.1/24' is not an IPv4 CIDR block",
        ),
        (
            {
                "public_endpoint": True,
                "authorized_networks": [{"cidr_block": f"10.0.{i}.0/24"} for i in range(51)],
            },
            "authorized_networks: has 51 entries; GKE allows at most 50 with a public endpoint",
        ),
        (
            {"network": "projects/x/global/networks/vpc"},
            "network: 'projects/x/global/networks/vpc' is not allowed",
        ),
    ],
)
def test_cluster_rules(args: dict[str, Any], expected: str) -> None:
    problems = refused("GkeCluster", {**CLUSTER, **args})
    assert any(p.startswith(expected) for p in problems), problems


def test_a_bad_label_key_is_named() -> None:
    (problem,) = refused("GkeCluster", {**CLUSTER, "resource_labels": {"Team": "ml"}})
    assert (
        problem.startswith("resource_labels.Team")
        and "'Team' is not allowed: expected a GCP label key" in problem
    )


def test_a_standard_cluster_without_a_system_pool_gets_the_default_one() -> None:
    result = construct("GkeCluster", CLUSTER)
    assert result.error is None, result.error
    pool = result.one("gcp:container/nodePool:NodePool").inputs
    assert pool["nodeConfig"]["machineType"] == "e2-standard-4"
    assert pool["autoscaling"]["totalMinNodeCount"] == 1 and pool["autoscaling"]["totalMaxNodeCount"] == 3


def test_a_zonal_system_pool_may_have_one_node() -> None:
    args = {**CLUSTER, "location": "us-central1-a", "system_pool": {"max_nodes": 1}}
    result = construct("GkeCluster", args)
    assert result.error is None, result.error
    assert result.one("gcp:container/nodePool:NodePool").inputs["autoscaling"]["totalMaxNodeCount"] == 1


def test_an_authorized_network_is_named_after_its_range_by_default() -> None:
    args = {**CLUSTER, "public_endpoint": True, "authorized_networks": [{"cidr_block": "203.0.113.0/24"}]}
    result = construct("GkeCluster", args)
    assert result.error is None, result.error
    config = result.one("gcp:container/cluster:Cluster").inputs["masterAuthorizedNetworksConfig"]
    assert config["cidrBlocks"] == [{"cidrBlock": "203.0.113.0/24", "displayName": "203.0.113.0/24"}]


def test_international_lowercase_letters_are_gcp_label_values() -> None:
    result = construct("GkeCluster", {**CLUSTER, "resource_labels": {"team": "équipe-1"}})
    assert result.error is None, result.error


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"dcgm": "exporter"}, "exporter: required with dcgm exporter"),
        ({"exporter": EXPORTER}, "exporter: only allowed with dcgm exporter (dcgm is managed)"),
        ({"cluster_name": None}, "cluster_name: required with a dashboard or alerts"),
        ({"alerts": {"xid_errors": True}}, "alerts.xid_errors: true is not allowed with dcgm: managed"),
        ({"alerts": {"notification_channels": ["email"]}}, "alerts.notification_channels[0]: 'email'"),
        (
            {
                "alerts": {
                    "notification_channels": [f"projects/{PROJECT}/notificationChannels/{i}" for i in (1, 1)]
                }
            },
            f"alerts.notification_channels[1]: 'projects/{PROJECT}/notificationChannels/1' is listed twice "
            "(also at [0])",
        ),
        ({"cluster_name": 'gpu"} or vector(1)'}, "cluster_name: "),
        (
            {"dashboard": False, "serving": True},
            "serving: true has no effect without a dashboard or alerts (dashboard is false, alerts unset)",
        ),
        ({"dcgm": "exporter", "exporter": {"flavor": "gke"}}, "exporter.scraper_namespace: required"),
        (
            {"dcgm": "exporter", "exporter": {**EXPORTER, "required_node_labels": []}},
            "exporter.node_selector: required without required_node_labels",
        ),
    ],
)
def test_monitoring_rules(args: dict[str, Any], expected: str) -> None:
    merged = {k: v for k, v in {**MONITORING, **args}.items() if v is not None}
    problems = refused("GpuMonitoring", merged)
    assert any(p.startswith(expected) for p in problems), problems


def test_monitoring_without_a_dashboard_or_alerts_needs_no_cluster_name() -> None:
    args = {"dcgm": "exporter", "dashboard": False, "exporter": EXPORTER}
    result = construct("GpuMonitoring", args)
    assert result.error is None, result.error
    assert result.of_type("gke-gpu:index:DcgmExporter")
    assert result.of_type("gcp:monitoring/dashboard:Dashboard") == []


def test_the_alert_minutes_reach_the_policy_as_whole_seconds() -> None:
    result = construct(
        "GpuMonitoring", {**MONITORING, "dashboard": False, "alerts": {"idle_gpu_minutes": 30.0}}
    )
    assert result.error is None, result.error
    (policy,) = result.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    promql = policy.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]
    assert promql["duration"] == "1800s"
    assert policy.inputs["notificationChannels"] == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"tolerations": [{"operator": "Exists", "value": "x"}]},
            "tolerations[0].value: not allowed with operator Exists",
        ),
        (
            {"tolerations": [{"effect": "NoSchedule"}]},
            "tolerations[0].key: required unless operator is Exists",
        ),
        (
            {"tolerations": [{"key": "k", "toleration_seconds": 5}]},
            "tolerations[0].toleration_seconds: only allowed with effect NoExecute",
        ),
        (
            {"scrape_interval": "30 seconds"},
            "scrape_interval: '30 seconds' is not allowed: expected a Prometheus",
        ),
        (
            {"namespace": "Metrics"},
            "namespace: 'Metrics' is not allowed; expected a Kubernetes namespace name",
        ),
        ({"node_selector": {"bad key!": "x"}}, "node_selector."),
    ],
)
def test_exporter_rules(args: dict[str, Any], expected: str) -> None:
    problems = refused("DcgmExporter", {**EXPORTER, **args})
    assert any(p.startswith(expected) for p in problems), problems


def test_a_bad_node_selector_key_is_named() -> None:
    (problem,) = refused("DcgmExporter", {**EXPORTER, "node_selector": {"bad key!": "x"}})
    assert problem.startswith("node_selector.") and "expected a Kubernetes label key" in problem


def test_the_exporters_two_arg_types_list_the_same_keys() -> None:
    # DcgmExporterArgs (the component) and DcgmExporterSettings (GpuMonitoring's `exporter`).
    assert get_type_hints(DcgmExporterArgs) == get_type_hints(DcgmExporterSettings)
    assert DcgmExporterArgs.__required_keys__ == DcgmExporterSettings.__required_keys__


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"node_selector": {}}, "node_selector: "),
        ({"time_slicing_replicas": 1}, "time_slicing_replicas: 1 is not allowed; must be >= 2"),
        ({"runtime_class_name": "NVIDIA"}, "runtime_class_name: 'NVIDIA' is not allowed"),
    ],
)
def test_device_plugin_rules(args: dict[str, Any], expected: str) -> None:
    problems = refused("NvidiaDevicePlugin", {**PLUGIN, **args})
    assert any(p.startswith(expected) for p in problems), problems


def test_time_slicing_replicas_reach_the_plugin_config_as_a_whole_number() -> None:
    result = construct("NvidiaDevicePlugin", {**PLUGIN, "time_slicing_replicas": 4.0})
    assert result.error is None, result.error
    config = result.one("kubernetes:core/v1:ConfigMap").inputs["data"]["config.yaml"]
    assert "replicas: 4\n" in config


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"nodes": ["a", "b", "a"]}, "nodes: lists 'a' 2 times"),
        ({"nodes": ["Node_1"]}, "nodes[0]: 'Node_1' is not allowed: expected a Kubernetes node name"),
        ({"label_key": "-gpus"}, "label_key: '-gpus' is not allowed: expected a Kubernetes label key"),
        ({"label_value": "a b"}, "label_value: 'a b' is not allowed: expected a Kubernetes label value"),
    ],
)
def test_node_label_rules(args: dict[str, Any], expected: str) -> None:
    problems = refused("GpuNodeLabels", {**LABELS, **args})
    assert any(p.startswith(expected) for p in problems), problems


def test_sample_gpus_reach_the_pod_as_a_whole_number() -> None:
    args = with_value(SAMPLES, "workloads[0].target.gpus_per_pod", 2.0)
    result = construct("SampleWorkloads", args)
    assert result.error is None, result.error
    container = result.one("kubernetes:batch/v1:Job").inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"workloads": [{"kind": "nvidia-smi", "target": TARGET}] * 2},
            "workloads[1]: nvidia-smi on target 'l4' is listed twice",
        ),
        (
            {"workloads": [{"kind": "nvidia-smi", "target": TARGET, "replicas": 2}]},
            "workloads[0].replicas: only allowed for sharing-demo",
        ),
        (
            {
                "workloads": [
                    {"kind": "sharing-demo", "target": {**TARGET, "sharing": "MPS", "gpus_per_pod": 2}}
                ]
            },
            "workloads[0].target.gpus_per_pod: 2 is not allowed on shared GPUs",
        ),
        (
            {"workloads": [{"kind": "cuda-vector-add", "target": {**TARGET, "name": "a" * 50}}]},
            "workloads[0].target.name: too long",
        ),
        ({"namespace": "a" * 60}, "namespace: "),
        ({"extra_labels": {"team": "ml team"}}, "extra_labels.team: 'ml team' is not allowed"),
    ],
)
def test_sample_rules(args: dict[str, Any], expected: str) -> None:
    problems = refused("SampleWorkloads", {**SAMPLES, **args})
    assert any(p.startswith(expected) for p in problems), problems


def test_the_samples_commands_follow_the_jobs() -> None:
    holder: dict[str, Any] = {}

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        demo = {"kind": "sharing-demo", "target": {**TARGET, "sharing": "MPS", "shared_clients": 4}}
        holder["samples"] = sample_workloads.SampleWorkloads(
            NAME, {"workloads": [demo], "namespace": "smoke"}, opts=pulumi.ResourceOptions(provider=provider)
        )

    result = run_program({}, program=program)
    assert result.error is None, result.error
    commands = holder["samples"].commands
    assert list(commands) == ["sharing-demo-l4"]
    assert commands["sharing-demo-l4"]["wait"].startswith("kubectl wait -n smoke-mps ")


def test_existing_cluster_context_is_printable_text() -> None:
    (problem,) = refused("ExistingCluster", {**EXISTING, "context": "lab\n"})
    assert problem.startswith("context: 'lab\\n' is not allowed; expected printable text")
