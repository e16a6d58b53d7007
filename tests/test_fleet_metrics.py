"""What gives the fleet's dashboard and worker-unreachable alert their data on a real cluster (issue 29
item 5, issue 34 L7): kube-state-metrics in every cluster of the fleet reports the state of Kueue's
objects (the manager's MultiKueueClusters and Workloads, each worker's ClusterQueues) with the least
RBAC, Pod Security restricted, reachable only from Managed Prometheus' collectors; nothing stores a
token for the scrape (Kueue's own /metrics, which needs one, is not scraped). Every manifest is
checked against Kubernetes' schemas (kubernetes-validate) or the vendored CRDs (PodMonitoring:
prometheus-engine's)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gke_gpu.core import images
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.monitoring.fleet import state_config
from gke_gpu.monitoring.kube_state_metrics import APP, METRICS_PORT_NAME, MultiKueueStateMetrics
from tests.kubernetes_schemas import validate
from tests.test_fleet import applied as applied  # the module fixture: the example as `pulumi up` declares it
from tests.test_fleet import provider_of
from tools.offline import RunResult, run_program

CHART = "kubernetes:helm.sh/v4:Chart"
POD_MONITORING = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
CLUSTERS = {"manager": "gke", "us-east": "us-east-gke", "us-central": "us-central-gke"}


def on_cluster(result: RunResult, resource: Any) -> str:
    providers = {name: provider_of(result, urn_name) for name, urn_name in CLUSTERS.items()}
    return next(name for name, urn in providers.items() if (resource.provider or "").startswith(urn))


def kueue_configurations(result: RunResult) -> dict[str, dict[str, Any]]:
    charts = [
        r for r in result.of_type(CHART) if r.inputs["chart"].endswith("/kueue") and r.inputs.get("values")
    ]
    return {
        on_cluster(result, chart): yaml.safe_load(
            chart.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
        )
        for chart in charts
    }


def test_the_fleet_adds_nothing_to_kueues_metrics_it_no_longer_scrapes(applied: RunResult) -> None:
    charts = {
        on_cluster(applied, r): r for r in applied.of_type(CHART) if r.inputs["chart"].endswith("/kueue")
    }
    assert set(charts) == set(CLUSTERS)
    # No cluster's Kueue adds metrics: the workers' Configuration adds only the readiness timeout written
    # out (fleet.md, "Admission means capacity"), the manager's only MultiKueue's block.
    configurations = kueue_configurations(applied)
    assert set(configurations) == set(CLUSTERS)
    for cluster, configuration in configurations.items():
        assert configuration["metrics"] == {"bindAddress": ":8443"}, cluster
        assert ("multiKueue" in configuration) == (cluster not in ("us-east", "us-central")), cluster


def test_a_single_cluster_stack_keeps_the_charts_default_configuration() -> None:
    from tests.conftest import stack_render

    (kueue,) = [r for r in stack_render("train").of_type(CHART) if r.inputs["chart"].endswith("/kueue")]
    assert not kueue.inputs.get("values")


def objects_of(result: RunResult, component: str) -> list[Any]:
    """Every resource under the components of this type (their children, recursively)."""
    roots = [r for r in result.resources if r.type == f"gke-gpu:index:{component}"]
    found: list[Any] = []
    todo = list(roots)
    while todo:
        resource = todo.pop()
        children = result.children_of(resource)
        found += [c for c in children if c.custom]
        todo += children
    return found


def by_kind(objects: list[Any], kind: str) -> list[dict[str, Any]]:
    return [r.inputs for r in objects if r.inputs.get("kind") == kind]


def test_nothing_holds_a_token_for_a_scrape(applied: RunResult) -> None:
    """No PodMonitoring of the fleet sends credentials, and no Secret holds one (review L7)."""
    for monitoring in applied.of_type(POD_MONITORING):
        for endpoint in monitoring.inputs["spec"]["endpoints"]:
            assert "authorization" not in endpoint and "basicAuth" not in endpoint
    assert not [
        r for r in applied.of_type("kubernetes:core/v1:Secret") if "scraper" in r.inputs["metadata"]["name"]
    ]


@pytest.mark.parametrize(
    ("cluster", "role", "kinds"),
    [
        ("manager", "manager", ["multikueueclusters", "workloads"]),
        ("us-east", "worker", ["clusterqueues"]),
        ("us-central", "worker", ["clusterqueues"]),
    ],
)
def test_kube_state_metrics_runs_in_every_cluster_with_the_least_it_needs(
    applied: RunResult, cluster: str, role: str, kinds: list[str]
) -> None:
    objects = [o for o in objects_of(applied, "MultiKueueStateMetrics") if on_cluster(applied, o) == cluster]
    for obj in objects:
        validate(obj.inputs)
    (role_object,) = by_kind(objects, "ClusterRole")
    assert sorted((r["apiGroups"], r["resources"], r["verbs"]) for r in role_object["rules"]) == [
        (["apiextensions.k8s.io"], ["customresourcedefinitions"], ["list", "watch"]),
        (["kueue.x-k8s.io"], kinds, ["list", "watch"]),
    ]
    assert not by_kind(objects, "Role") and not by_kind(objects, "RoleBinding")
    (namespace,) = by_kind(objects, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    (deployment,) = by_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == images.KUBE_STATE_METRICS
    assert container["image"].endswith(":v2.20.0")
    assert "--custom-resource-state-only=true" in container["args"]
    (config_flag,) = [a for a in container["args"] if a.startswith("--custom-resource-state-config-file=")]
    (config_map,) = by_kind(objects, "ConfigMap")
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"] and mount["name"] == volume["name"]
    directory, key = config_flag.split("=", 1)[1].rsplit("/", 1)
    assert mount["mountPath"] == directory
    assert yaml.safe_load(config_map["data"][key]) == state_config(role)
    # Pod Security restricted, bounded.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    # Only Managed Prometheus' collectors reach its metrics port; the PodMonitoring scrapes that port.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (policy,) = by_kind(objects, "NetworkPolicy")
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gmp-system"}}}
    ]
    assert rule["ports"] == [{"port": ports["http-metrics"], "protocol": "TCP"}]
    (monitoring,) = by_kind(objects, "PodMonitoring")
    (endpoint,) = monitoring["spec"]["endpoints"]
    # The target labels the promtool tests' series carry (tests/test_fleet_monitoring.py `condition`):
    # `namespace` and `job` (the PodMonitoring's name), `instance` `<pod>:<port name>`.
    meta = monitoring["metadata"]
    assert (meta["namespace"], meta["name"], endpoint["port"]) == (APP, APP, METRICS_PORT_NAME)
    assert endpoint["port"] == "http-metrics"
    assert monitoring["spec"]["selector"]["matchLabels"].items() <= pod_labels(deployment).items()
    assert monitoring["spec"]["targetLabels"] == {"metadata": []}


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    return deployment["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("component", [MultiKueueStateMetrics])
def test_a_bad_namespace_is_refused_before_anything_is_declared(component: Any) -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        component("metrics", {"namespace": "Not_A_Namespace"}, opts=pulumi.ResourceOptions(provider=provider))

    result = run_program({}, program=program)
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    (problem,) = result.error.problems
    assert problem.startswith("namespace: 'Not_A_Namespace'") and "lowercase letters" in problem
    assert not [r for r in result.resources if r.name.startswith("metrics")]
