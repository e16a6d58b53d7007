"""What gives the fleet's dashboard and worker-unreachable alert their data on a real cluster (issue 29
item 5): every Kueue of the fleet reports its ClusterQueue resource metrics and is scraped by Managed
Prometheus over HTTPS with a token that may read /metrics only; the manager runs kube-state-metrics
reporting nothing but each MultiKueueCluster's conditions, with the least RBAC, Pod Security
restricted, reachable only from Managed Prometheus' collectors. Every manifest is checked against
Kubernetes' schemas (kubernetes-validate) or the vendored CRDs (PodMonitoring: prometheus-engine's)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gke_gpu.core import images
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.monitoring.fleet import MULTIKUEUE_CLUSTER_STATE
from gke_gpu.monitoring.kube_state_metrics import APP, METRICS_PORT_NAME, MultiKueueStateMetrics
from gke_gpu.monitoring.kueue_metrics import KueueMetricsScrape
from tests.kubernetes_schemas import validate
from tests.test_fleet import applied as applied  # the module fixture: the example as `pulumi up` declares it
from tests.test_fleet import provider_of
from tools.offline import RunResult, run_program

CHART = "kubernetes:helm.sh/v4:Chart"
POD_MONITORING = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
CLUSTERS = {"manager": "gke", "us-east": "us-east-gke", "us-central": "us-central-gke"}
# Kueue v0.19.2's chart (charts/kueue/templates/manager/manager.yaml): the controller's container
# port of its HTTPS metrics server.
KUEUE_METRICS_PORT = ("metrics", 8443)


def on_cluster(result: RunResult, resource: Any) -> str:
    providers = {name: provider_of(result, urn_name) for name, urn_name in CLUSTERS.items()}
    return next(name for name, urn in providers.items() if (resource.provider or "").startswith(urn))


def kueue_configurations(result: RunResult) -> dict[str, dict[str, Any]]:
    charts = [r for r in result.of_type(CHART) if r.inputs["chart"].endswith("/kueue")]
    return {
        on_cluster(result, chart): yaml.safe_load(
            chart.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
        )
        for chart in charts
    }


def test_every_kueue_of_the_fleet_reports_its_cluster_queue_resources(applied: RunResult) -> None:
    configurations = kueue_configurations(applied)
    assert set(configurations) == set(CLUSTERS)
    for cluster, configuration in configurations.items():
        # Kueue v0.19.2's config API: ControllerMetrics.EnableClusterQueueResources.
        assert configuration["metrics"] == {"bindAddress": ":8443", "enableClusterQueueResources": True}, (
            cluster
        )


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


def test_kueue_is_scraped_on_every_cluster_over_https_with_a_metrics_only_token(applied: RunResult) -> None:
    scrapes = [r for r in applied.of_type(POD_MONITORING) if r.inputs["metadata"]["name"] == "kueue"]
    assert sorted(on_cluster(applied, r) for r in scrapes) == sorted(CLUSTERS)
    objects = objects_of(applied, "KueueMetricsScrape")
    for obj in objects:
        validate(obj.inputs)
    for scrape in scrapes:
        spec = scrape.inputs["spec"]
        namespace = scrape.inputs["metadata"]["namespace"]
        assert namespace == "kueue-system"
        # Kueue's chart labels its controller Pods so (kueue.selectorLabels, the chart's name).
        assert spec["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": "kueue",
            "control-plane": "controller-manager",
        }
        (endpoint,) = spec["endpoints"]
        assert endpoint["port"] == KUEUE_METRICS_PORT[0] and endpoint["scheme"] == "https"
        # Kueue's self-signed metrics certificate, as its own ServiceMonitor: not verified.
        assert endpoint["tls"] == {"insecureSkipVerify": True}
        assert endpoint["authorization"]["type"] == "Bearer"
        secret_ref = endpoint["authorization"]["credentials"]["secret"]
        assert secret_ref["key"] == "token" and "namespace" not in secret_ref  # GMP: its own namespace
    # The token is a ServiceAccount's whose only grant is GET /metrics.
    secrets = [o for o in by_kind(objects, "Secret") if o["metadata"]["name"] == secret_ref["name"]]
    assert len(secrets) == len(CLUSTERS)
    for secret in secrets:
        assert secret["type"] == "kubernetes.io/service-account-token"
        account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    roles = {o["metadata"]["name"]: o["rules"] for o in by_kind(objects, "ClusterRole")}
    bindings = by_kind(objects, "ClusterRoleBinding")
    assert {(b["roleRef"]["name"], s["name"]) for b in bindings for s in b["subjects"]} == {
        (account, account)
    }
    assert roles[account] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    # Managed Prometheus' collector may read that one Secret, in that namespace, and nothing else.
    reader_roles = {o["metadata"]["name"]: o["rules"] for o in by_kind(objects, "Role")}
    for binding in by_kind(objects, "RoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}
        ]
        assert reader_roles[binding["roleRef"]["name"]] == [
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": [secret_ref["name"]],
                "verbs": ["get", "list", "watch"],
            }
        ]


def test_kube_state_metrics_runs_on_the_manager_only_with_the_least_it_needs(applied: RunResult) -> None:
    objects = objects_of(applied, "MultiKueueStateMetrics")
    assert {on_cluster(applied, o) for o in objects} == {"manager"}
    for obj in objects:
        validate(obj.inputs)
    (role,) = by_kind(objects, "ClusterRole")
    assert sorted((r["apiGroups"], r["resources"], r["verbs"]) for r in role["rules"]) == [
        (["apiextensions.k8s.io"], ["customresourcedefinitions"], ["list", "watch"]),
        (["kueue.x-k8s.io"], ["multikueueclusters"], ["list", "watch"]),
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
    assert yaml.safe_load(config_map["data"][key]) == MULTIKUEUE_CLUSTER_STATE
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


@pytest.mark.parametrize("component", [KueueMetricsScrape, MultiKueueStateMetrics])
def test_a_bad_namespace_is_refused_before_anything_is_declared(component: Any) -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        component("metrics", {"namespace": "Not_A_Namespace"}, opts=pulumi.ResourceOptions(provider=provider))

    result = run_program({}, program=program)
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    (problem,) = result.error.problems
    assert problem.startswith("namespace: 'Not_A_Namespace'") and "lowercase letters" in problem
    assert not [r for r in result.resources if r.name.startswith("metrics")]
