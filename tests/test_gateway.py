"""The Inference Gateway (`gke-gpu:serving[i].gateway: true`, InferenceGateway): an internal Gateway,
an HTTPRoute to the service's InferencePool, llm-d-router's endpoint picker from its pinned chart, the
proxy-only subnet and the cluster's Gateway API; the objects checked against the vendored CRDs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gke_gpu.core import images
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.gateway import (
    EPP_CHART,
    EPP_VERSION,
    HEALTH_CHECK_RANGES,
    InferenceGateway,
    epp_values,
)
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    ULTRA_POOL,
    config_error,
    render,
    stack_config,
)
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

L4 = {**L4_POOL, "driverVersion": "LATEST"}
CHAT = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen2.5-1.5b-instruct"}
GATED = {**CHAT, "gateway": True}
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
CHART = "kubernetes:helm.sh/v4:Chart"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
PATCH = "kubernetes:apps/v1:DeploymentPatch"
EXISTING_VPC = {
    "network": "projects/host-project/global/networks/shared",
    "subnetwork": "projects/host-project/regions/us-central1/subnetworks/gke",
    "podsRangeName": "pods",
    "servicesRangeName": "services",
}


@pytest.fixture(scope="module")
def gated() -> RunResult:
    return render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[GATED]))


def chart_inference_pool(values: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    """The InferencePool llm-d-router-gateway v0.10.0 renders from these values
    (config/charts/routerlib/templates/_inferencepool.yaml at the tag), so that what the chart makes of
    our values is checked against the vendored CRD."""
    servers, pool = values["router"]["modelServers"], values["router"]["inferencePool"]
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {
            "name": release,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": f"{release}-epp"},
        },
        "spec": {
            "targetPorts": [{"number": p["number"]} for p in servers["targetPorts"]],
            "appProtocol": {"http": "http", "grpc": "kubernetes.io/h2c"}[servers["protocol"]],
            "selector": {"matchLabels": dict(servers["matchLabels"])},
            "endpointPickerRef": {
                "name": f"{release}-epp",
                "port": {"number": values["router"]["epp"].get("extProcPort", 9002)},
                "failureMode": pool["failureMode"],
            },
        },
    }


def chart_epp_deployment(release: str, namespace: str) -> dict[str, Any]:
    """The parts of the chart's EPP Deployment (routerlib _deployment.yaml at v0.10.0) that a valid
    Deployment needs, as the chart renders them for `release`."""
    selector = {"llm-d-router-gateway": f"{release}-epp"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{release}-epp", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": {**selector, "llm-d.ai/igw-mode": "llm-d-router-gateway"}},
                "spec": {
                    "serviceAccountName": f"{release}-epp",
                    "containers": [{"name": "epp", "image": images.EPP}],
                    "volumes": [{"name": "plugins-config-volume", "configMap": {"name": f"{release}-epp"}}],
                },
            },
        },
    }


def apply(target: Any, patch: Any) -> Any:
    """Server-side apply's merge of a patch into an object, for what the EPP patch holds: maps merged,
    the lists containers, volumes (keyed by name) and volumeMounts (by mountPath) merged by key."""
    if isinstance(target, dict) and isinstance(patch, dict):
        out = dict(target)
        for key, value in patch.items():
            out[key] = apply(target.get(key), value) if key in target else copy.deepcopy(value)
        return out
    if isinstance(target, list) and isinstance(patch, list) and patch and isinstance(patch[0], dict):
        key = "mountPath" if "mountPath" in patch[0] else "name"
        merged = {item[key]: item for item in target}
        for item in patch:
            merged[item[key]] = apply(merged[item[key]], item) if item[key] in merged else item
        return list(merged.values())
    return copy.deepcopy(patch)


def test_the_gateway_is_internal_and_routes_every_path_to_the_pool(gated: RunResult) -> None:
    gateway = gated.one(GATEWAY).inputs
    assert gateway["metadata"] == {**gateway["metadata"], "name": "chat", "namespace": "serve-chat"}
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    assert gateway["spec"]["listeners"] == [
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}}
    ]
    assert "addresses" not in gateway["spec"]  # an ephemeral internal address of the nodes' subnet
    route = gated.one(ROUTE).inputs
    assert route["metadata"]["namespace"] == "serve-chat"
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "chat"}
    ]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat"}
    ]
    # On GKE the pool's GCPBackendPolicy (the chart's) sets the request timeout, not the route.
    assert "timeouts" not in rule


def test_the_endpoint_picker_comes_from_the_pinned_chart_with_the_servers_selector(gated: RunResult) -> None:
    chart = gated.one(CHART).inputs
    assert (chart["chart"], chart["version"]) == (EPP_CHART, EPP_VERSION)
    assert EPP_CHART == "oci://ghcr.io/llm-d/charts/llm-d-router-gateway" and EPP_VERSION == "v0.10.0"
    # The release name is the InferencePool's (the chart names it after the release) and the route's backend.
    assert (chart["name"], chart["namespace"]) == ("chat", "serve-chat")
    values = chart["values"]
    assert values["provider"] == {"name": "gke"}  # GKE's HealthCheckPolicy and GCPBackendPolicy
    assert values["httpRoute"] == {"create": False}  # the component declares its own
    servers = values["router"]["modelServers"]
    deployment = gated.one("kubernetes:apps/v1:Deployment", "serve-chat-deployment").inputs
    assert servers["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert servers == {**servers, "type": "vllm", "protocol": "http", "targetPorts": [{"number": 8000}]}
    assert values["router"]["inferencePool"] == {"create": True, "failureMode": "FailOpen"}
    epp = values["router"]["epp"]
    image = epp["image"]
    assert f"{image['registry']}/{image['repository']}:{image['tag']}" == images.EPP
    assert image["tag"] == EPP_VERSION and image["pullPolicy"] == "IfNotPresent"
    assert epp["replicas"] == 1
    # Bounded: the chart's own default asks for 8 CPUs and 8 GiB.
    assert epp["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "2", "memory": "2Gi"},
    }
    assert epp_values("chat") == values


def test_the_pool_the_chart_makes_of_the_values_fits_the_crd(gated: RunResult) -> None:
    values = gated.one(CHART).inputs["values"]
    pool = chart_inference_pool(values, "chat", "serve-chat")
    validate(pool)
    # GAIE v1.5.0's CRD (GKE may install an older one) still requires endpointPickerRef; it is set.
    assert pool["spec"]["endpointPickerRef"]["name"] == "chat-epp"
    route = gated.one(ROUTE).inputs
    assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == pool["metadata"]["name"]


def test_the_endpoint_picker_is_hardened_by_a_patch_of_the_charts_deployment(gated: RunResult) -> None:
    patch = gated.one(PATCH).inputs
    assert patch["metadata"] == {"name": "chat-epp", "namespace": "serve-chat"}
    pod = patch["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,  # the image's own user (Dockerfile.epp: USER 65532:65532)
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["name"] == "epp"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    merged = apply(chart_epp_deployment("chat", "serve-chat"), patch)
    validate(merged)
    spec = merged["spec"]["template"]["spec"]
    assert {v["name"] for v in spec["volumes"]} == {"plugins-config-volume", "tmp"}
    assert spec["containers"][0]["image"] == images.EPP  # the chart's fields are kept


def test_the_proxies_and_health_checks_reach_the_server_and_the_picker_only(gated: RunResult) -> None:
    server = gated.one(NETPOL, "gateway-chat-server-ingress").inputs
    own = gated.one(NETPOL, "serve-chat-network-policy").inputs
    # A policy of its own, added to the server's (policies add up), on the same Pods and port.
    assert server["spec"]["podSelector"] == own["spec"]["podSelector"]
    assert server["metadata"]["name"] == "chat-gateway"
    (rule,) = server["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8000, "protocol": "TCP"}]
    sources = [peer["ipBlock"]["cidr"] for peer in rule["from"]]
    assert sources == ["10.10.16.0/23", "35.191.0.0/16", "130.211.0.0/22"]
    assert tuple(sources[1:]) == HEALTH_CHECK_RANGES
    epp = gated.one(NETPOL, "gateway-chat-epp-ingress").inputs
    # The chart's EPP Pods (routerlib selectorLabels, with the chart's InferencePool).
    assert epp["spec"]["podSelector"] == {"matchLabels": {"llm-d-router-gateway": "chat-epp"}}
    assert (
        epp["spec"]["podSelector"]["matchLabels"]
        == chart_epp_deployment("chat", "x")["spec"]["selector"]["matchLabels"]
    )
    (rule,) = epp["spec"]["ingress"]
    assert rule["ports"] == [{"port": 9002, "protocol": "TCP"}, {"port": 9003, "protocol": "TCP"}]
    assert [peer["ipBlock"]["cidr"] for peer in rule["from"]] == sources


def test_the_vpc_gets_a_proxy_only_subnet_and_the_cluster_the_gateway_api(gated: RunResult) -> None:
    subnet = gated.one(SUBNET, "network-proxy-only").inputs
    assert subnet == {
        **subnet,
        "name": "gpu-test-proxy",
        "purpose": "REGIONAL_MANAGED_PROXY",
        "role": "ACTIVE",
        "ipCidrRange": "10.10.16.0/23",
        "region": "us-central1",
    }
    assert "logConfig" not in subnet  # GCP logs no flows of a proxy-only subnet
    cluster = gated.one("gcp:container/cluster:Cluster").inputs
    assert cluster["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    plain = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT]))
    assert "gatewayApiConfig" not in plain.one("gcp:container/cluster:Cluster").inputs
    assert [r.name for r in plain.of_type(SUBNET)] == ["network-nodes"]
    assert plain.of_type("gke-gpu:index:InferenceGateway") == []


def test_every_object_is_valid_against_the_schemas_and_crds(gated: RunResult) -> None:
    component = gated.one("gke-gpu:index:InferenceGateway")
    children = gated.children_of(component)
    kinds = set()
    for child in children:
        if child.type in (CHART, PATCH):
            continue  # the chart's values and the patch are checked above
        validate(child.inputs)
        kinds.add(child.inputs["kind"])
    assert kinds == {"Gateway", "HTTPRoute", "NetworkPolicy"}
    assert {c.type for c in children} == {GATEWAY, ROUTE, NETPOL, CHART, PATCH}


def test_the_output_names_the_gateway_and_how_to_reach_it(gated: RunResult) -> None:
    gateway = gated.outputs["serving"]["chat"]["gateway"]
    assert gateway["name"] == "chat" and gateway["inferencePool"] == "chat"
    assert gateway["class"].startswith("gke-l7-rilb (regional internal Application Load Balancer")
    assert gateway["endpointPicker"] == f"chat-epp ({EPP_CHART} {EPP_VERSION})"
    address = "kubectl get gateway -n serve-chat chat -o jsonpath='{.status.addresses[0].value}'"
    assert gateway["commands"]["address"] == address
    assert gateway["commands"]["ask"].startswith(
        f"ADDRESS=$({address}); curl -s http://$ADDRESS/v1/completions"
    )


def test_autopilot_gets_the_gateway_api_too() -> None:
    pool = {"name": "l4", "accelerator": "nvidia-l4", "driverVersion": "LATEST"}
    result = render(stack_config(cluster=AUTOPILOT_CLUSTER, gpuPools=[pool], serving=[GATED]))
    assert result.one("gcp:container/cluster:Cluster").inputs["gatewayApiConfig"] == {
        "channel": "CHANNEL_STANDARD"
    }
    assert result.one(GATEWAY).inputs["spec"]["gatewayClassName"] == "gke-l7-rilb"
    assert result.one(SUBNET, "network-proxy-only").inputs["ipCidrRange"] == "10.10.16.0/23"


def test_an_existing_vpc_names_its_proxy_only_subnet_and_gets_none() -> None:
    network = {"existing": {**EXISTING_VPC, "proxyOnlyCidr": "172.16.0.0/23"}}
    result = render(stack_config(cluster=STANDARD_CLUSTER, network=network, gpuPools=[L4], serving=[GATED]))
    assert result.of_type(SUBNET) == []
    rule = result.one(NETPOL, "gateway-chat-server-ingress").inputs["spec"]["ingress"][0]
    assert rule["from"][0] == {"ipBlock": {"cidr": "172.16.0.0/23"}}
    assert result.outputs["serving"]["chat"]["gateway"]["proxyOnlyCidr"] == "172.16.0.0/23"


def test_a_given_proxy_only_range_is_used() -> None:
    network = {"proxyOnlyCidr": "10.30.0.0/24"}
    result = render(stack_config(cluster=STANDARD_CLUSTER, network=network, gpuPools=[L4], serving=[GATED]))
    assert result.one(SUBNET, "network-proxy-only").inputs["ipCidrRange"] == "10.30.0.0/24"


def test_the_cost_estimate_notes_the_load_balancer(gated: RunResult) -> None:
    from tools import cost, plan

    notes = cost.estimate(plan.to_document(gated))["notes"]
    assert any(
        n.startswith("not in the estimate: Gateway serve-chat/chat (gke-l7-rilb), a regional internal")
        for n in notes
    )


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"network": {"existing": EXISTING_VPC}},
            "gke-gpu:network.existing.proxyOnlyCidr: required with gateway: true (serving[0]): the range of "
            "the existing VPC's proxy-only subnet in us-central1",
        ),
        (
            {
                "network": {
                    "existing": {**EXISTING_VPC, "proxyOnlyCidr": "172.16.0.0/23"},
                    "proxyOnlyCidr": "10.30.0.0/23",
                }
            },
            "gke-gpu:network.proxyOnlyCidr: not allowed with network.existing",
        ),
        (
            {"network": {"proxyOnlyCidr": "10.10.0.0/23"}},
            "gke-gpu:network.proxyOnlyCidr: 10.10.0.0/23 overlaps network.subnetCidr 10.10.0.0/20; the "
            "proxy-only subnet needs a range of its own",
        ),
        (
            {"network": {"subnetCidr": "10.10.0.0/16"}},
            "gke-gpu:network.proxyOnlyCidr (default 10.10.16.0/23): 10.10.16.0/23 overlaps "
            "network.subnetCidr 10.10.0.0/16",
        ),
        (
            {"network": {"proxyOnlyCidr": "10.30.0.0/27"}},
            "gke-gpu:network.proxyOnlyCidr: 10.30.0.0/27 is too small; a proxy-only subnet has at least 64 "
            "addresses (/26 or larger; Google recommends a /23)",
        ),
        (
            {"network": {"proxyOnlyCidr": "10.30.0.1/23"}},
            "gke-gpu:network.proxyOnlyCidr: '10.30.0.1/23' is not an IPv4 CIDR block",
        ),
        (
            {"network": {"existing": {**EXISTING_VPC, "proxyOnlyCidr": "172.16.0.0/28"}}},
            "gke-gpu:network.existing.proxyOnlyCidr: 172.16.0.0/28 is too small",
        ),
    ],
)
def test_what_a_gateway_needs_of_the_network_is_refused_with_the_key(keys: dict, expected: str) -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [GATED], **keys})
    assert expected in message, message
    assert message.count("\n  - ") == 1, message  # that problem alone, no follow-on


def test_a_proxy_only_range_without_a_gateway_is_refused_as_ignored() -> None:
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4],
            "serving": [CHAT],
            "network": {"proxyOnlyCidr": "10.30.0.0/23"},
        }
    )
    assert (
        "gke-gpu:network.proxyOnlyCidr: '10.30.0.0/23' would be ignored: no service has gateway: true"
        in message
    )
    existing = {"existing": {**EXISTING_VPC, "proxyOnlyCidr": "172.16.0.0/23"}}
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "network": existing})
    assert "gke-gpu:network.existing.proxyOnlyCidr: '172.16.0.0/23' would be ignored" in message


def test_a_broken_serving_entry_is_not_judged_for_its_gateway() -> None:
    """The entry that failed its shape may be the one with gateway: true: no 'would be ignored'."""
    broken = {**GATED, "replicas": "two"}
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4],
            "serving": [broken],
            "network": {"proxyOnlyCidr": "10.30.0.0/23"},
        }
    )
    assert "gke-gpu:serving[0].replicas" in message and "would be ignored" not in message


def test_the_gpudirect_range_is_kept_clear_too() -> None:
    pool = ULTRA_POOL
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4, pool],
            "serving": [GATED],
            "network": {"proxyOnlyCidr": "192.168.0.0/23"},
        }
    )
    assert (
        "gke-gpu:network.proxyOnlyCidr: 192.168.0.0/23 overlaps network.gpudirectCidr 192.168.0.0/16"
        in message
    )


def test_a_gateway_on_an_existing_cluster_is_refused_with_the_serving_section() -> None:
    existing = {
        "mode": "existing",
        "flavor": "gke",
        "kubeconfig": "apiVersion: v1\nkind: Config\ncontexts: [{name: a}]\n",
    }
    message = config_error({"cluster": existing, "serving": [GATED]})
    assert "gke-gpu:serving: not allowed with cluster.mode existing" in message
    assert "gateway" not in message and "proxyOnlyCidr" not in message


ARGS = {"service": "chat", "proxy_only_cidr": "10.10.16.0/23"}


def test_the_component_checks_its_args() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        InferenceGateway.check_args("gw", {"service": "Chat_1", "proxy_only_cidr": "10.10.16.1/23"})
    text = str(refused.value)
    assert "service: 'Chat_1'" in text
    with pytest.raises(InvalidArgsError, match=r"proxy_only_cidr: '10.10.16.1/23' is not an IPv4 CIDR block"):
        InferenceGateway.check_args("gw", {**ARGS, "proxy_only_cidr": "10.10.16.1/23"})
    assert InferenceGateway.check_args("gw", ARGS).service == "chat"


def test_two_services_get_a_gateway_each_and_share_the_proxy_only_subnet() -> None:
    pool = {**L4, "maxNodes": 3}
    other = {**GATED, "name": "code", "model": "gs://models-bucket/qwen2.5-coder"}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[GATED, other]))
    gateways = {
        (g.inputs["metadata"]["namespace"], g.inputs["metadata"]["name"]) for g in result.of_type(GATEWAY)
    }
    assert gateways == {("serve-chat", "chat"), ("serve-code", "code")}
    assert {c.inputs["name"] for c in result.of_type(CHART)} == {"chat", "code"}
    assert (
        len([s for s in result.of_type(SUBNET) if s.inputs.get("purpose") == "REGIONAL_MANAGED_PROXY"]) == 1
    )


def test_a_broken_network_section_gets_no_gateway_follow_on() -> None:
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [GATED], "network": {"subnetCidr": "ten"}}
    )
    assert "gke-gpu:network.subnetCidr" in message
    assert "proxyOnlyCidr" not in message and message.count("\n  - ") == 1, message
