"""Disaggregated prefill and decode (issue 39): the example stack Pulumi.pd.yaml renders prefill and decode
as their own Deployments, each vLLM with the NixlConnector, decode behind llm-d's routing sidecar, both
on the A3 Ultra pool's RDMA NICs (a DRANET claim each), the gateway's endpoint picker with llm-d's P/D
profiles, the NetworkPolicies between the roles and the admission policies that admit exactly this
namespace to the NICs; its wide-EP variant renders LeaderWorkerSets of data-parallel ranks. Every object
is checked against the vendored schemas and CRDs (their CEL rules included)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core import images
from gke_gpu.serving.epp_config import CONFIG_FILE, pd_config
from tests.kubernetes_schemas import validate
from tools.offline import RunResult, run_program

ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RCT = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
CHART = "kubernetes:helm.sh/v4:Chart"
PODMON = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
KV_PRODUCER = '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
KV_CONSUMER = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'


def example_config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "Pulumi.pd.yaml").read_text(encoding="utf-8"))["config"]


def render_config(config: dict[str, Any]) -> RunResult:
    result = run_program(config, stack="pd", preview=True)
    if result.error is not None:
        raise result.error
    return result


def wide_ep_config() -> dict[str, Any]:
    """The wide-EP variant of docs/serving.md: DeepSeek-R1 over 2 nodes a role on the same pool."""
    config = example_config()
    config["gke-gpu:gpuPools"][0]["maxNodes"] = 4
    config["gke-gpu:serving"] = [
        {
            "name": "dsr1",
            "pool": "a3u",
            "model": "gs://example-gpu-pd-models/deepseek-r1",
            "modelInfo": {"catalog": "deepseek-ai/DeepSeek-R1"},
            "maxModelLen": 32768,
            "gateway": True,
            "expertParallel": {"tensorParallel": 1},
            "disaggregation": {
                "prefill": {"replicas": 1, "gpusPerReplica": 16},
                "decode": {"replicas": 1, "gpusPerReplica": 16},
            },
        }
    ]
    config["gke-gpu:workloads"] = []
    return config


@functools.cache
def rendered(variant: str) -> RunResult:
    """The render of Pulumi.pd.yaml (`pd`) or its wide-EP variant (`wide`), once per test process."""
    return render_config(example_config() if variant == "pd" else wide_ep_config())


@pytest.fixture
def pd() -> RunResult:
    return copy.deepcopy(rendered("pd"))


@pytest.fixture
def wide() -> RunResult:
    return copy.deepcopy(rendered("wide"))


def role(result: RunResult, name: str) -> dict[str, Any]:
    return result.one(DEPLOYMENT, f"serve-chat-{name}-deployment").inputs


def pod_of(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    template = spec["template"] if "template" in spec else spec["leaderWorkerTemplate"]["workerTemplate"]
    return template


def container(pod: dict[str, Any], name: str = "vllm") -> dict[str, Any]:
    (found,) = [c for c in pod["spec"]["containers"] if c["name"] == name]
    return found


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_prefill_and_decode_are_separate_deployments_with_their_replicas_and_gpus(pd: RunResult) -> None:
    prefill, decode = role(pd, "prefill"), role(pd, "decode")
    assert (prefill["metadata"]["name"], decode["metadata"]["name"]) == ("chat-prefill", "chat-decode")
    assert (prefill["spec"]["replicas"], decode["spec"]["replicas"]) == (4, 2)
    for workload, gpus, role_name in ((prefill, "2", "prefill"), (decode, "4", "decode")):
        vllm = container(pod_of(workload))
        assert vllm["resources"]["limits"]["nvidia.com/gpu"] == gpus
        assert f"--tensor-parallel-size={gpus}" in vllm["args"]
        # The role label llm-d's prefill-filter and decode-filter read, in the selector too: two
        # Deployments of one service never share Pods.
        assert workload["spec"]["selector"]["matchLabels"]["llm-d.ai/role"] == role_name
        assert pod_of(workload)["metadata"]["labels"]["llm-d.ai/role"] == role_name
    # No aggregated workload or autoscaler beside them.
    assert {d.name for d in pd.of_type(DEPLOYMENT)} == {
        "serve-chat-prefill-deployment",
        "serve-chat-decode-deployment",
    }
    assert pd.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler") == []


def test_vllm_runs_the_nixl_connector_as_producer_on_prefill_and_consumer_on_decode(pd: RunResult) -> None:
    prefill = container(pod_of(role(pd, "prefill")))
    decode = container(pod_of(role(pd, "decode")))
    assert f"--kv-transfer-config={KV_PRODUCER}" in prefill["args"]
    assert f"--kv-transfer-config={KV_CONSUMER}" in decode["args"]
    assert "--port=8000" in prefill["args"] and "--port=8200" in decode["args"]
    # The same model path and served name on both: vLLM's compatibility hash covers the model string.
    assert prefill["args"][:2] == decode["args"][:2] == ["/models", "--served-model-name=chat"]
    assert prefill["image"] == decode["image"]
    for vllm in (prefill, decode):
        assert env(vllm)["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        ports = {p["name"]: p["containerPort"] for p in vllm["ports"]}
        assert ports["nixl"] == 5600
    assert env(prefill)["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"] == "120"
    assert "VLLM_HTTP_TIMEOUT_KEEP_ALIVE" not in env(decode)


def test_decode_has_the_routing_sidecar_as_a_native_sidecar(pd: RunResult) -> None:
    pod = pod_of(role(pd, "decode"))
    (sidecar,) = pod["spec"]["initContainers"]
    assert sidecar["name"] == "routing-proxy"
    assert sidecar["image"] == images.DISAGG_SIDECAR == "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["args"] == [
        "--port=8000",
        "--model-server-port=8200",
        "--kv-connector=nixlv2",
        "--secure-proxy=false",
    ]
    security = sidecar["securityContext"]
    assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
    assert security["capabilities"] == {"drop": ["ALL"]} and security["allowPrivilegeEscalation"] is False
    assert sidecar["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    # A Pod's port names are unique across its containers.
    names = [
        p["name"] for c in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]] for p in c["ports"]
    ]
    assert len(names) == len(set(names))
    assert "initContainers" not in pod_of(role(pd, "prefill"))["spec"]


def test_both_roles_claim_their_share_of_the_rdma_nics_through_dranet(pd: RunResult) -> None:
    templates = {t.inputs["metadata"]["name"]: t.inputs for t in pd.of_type(RCT)}
    # 8 NICs for 8 GPUs: a prefill Pod of 2 GPUs claims 2, a decode Pod of 4 claims 4.
    assert set(templates) == {"rdma-2", "rdma-4"}
    for name, count in (("rdma-2", 2), ("rdma-4", 4)):
        template = templates[name]
        assert template["metadata"]["namespace"] == "serve-chat"
        (request,) = template["spec"]["spec"]["devices"]["requests"]
        assert request["exactly"] == {
            "deviceClassName": "mrdma.google.com",
            "allocationMode": "ExactCount",
            "count": count,
        }
    for name, template in (("prefill", "rdma-2"), ("decode", "rdma-4")):
        pod = pod_of(role(pd, name))
        assert pod["spec"]["resourceClaims"] == [{"name": "rdma-nics", "resourceClaimTemplateName": template}]
        vllm = container(pod)
        assert vllm["resources"]["claims"] == [{"name": "rdma-nics"}]
        assert env(vllm)["UCX_IB_ROCE_REACHABILITY_MODE"] == "all"
        # NCCL's own transport over the NICs: GKE's gIB plugin off, as llm-d's GKE overlays.
        assert env(vllm)["NCCL_NET_PLUGIN"] == "" and env(vllm)["NCCL_TUNER_PLUGIN"] == "none"
        # No host path, no capability, no privilege: Pod Security baseline admits the Pod as it is.
        assert all("hostPath" not in v for v in pod["spec"]["volumes"])
        assert vllm["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert "networking.gke.io/interfaces" not in pod["metadata"].get("annotations", {})


def test_the_gateway_runs_the_pd_profiles_over_both_roles(pd: RunResult) -> None:
    values = pd.one(CHART).inputs["values"]
    router = values["router"]
    # Both roles' Pods: the service's selector without a role.
    assert router["modelServers"]["matchLabels"] == {
        "app.kubernetes.io/name": "chat",
        "app.kubernetes.io/instance": "chat",
    }
    assert router["modelServers"]["targetPorts"] == [{"number": 8000}]
    epp = router["epp"]
    assert epp["replicas"] == 1
    assert epp["pluginsConfigFile"] == CONFIG_FILE
    assert yaml.safe_load(epp["pluginsCustomConfig"][CONFIG_FILE]) == pd_config()


def test_the_roles_reach_each_other_only_where_the_kv_transfer_needs(pd: RunResult) -> None:
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in pd.of_type(NETPOL)}
    kv = policies["chat-kv-transfer"]
    assert kv["podSelector"]["matchLabels"]["llm-d.ai/role"] == "prefill"
    (rule,) = kv["ingress"]
    assert rule["from"][0]["podSelector"]["matchLabels"]["llm-d.ai/role"] == "decode"
    assert sorted(p["port"] for p in rule["ports"]) == [5600, 8000]
    egress = policies["chat-kv-transfer-egress"]
    assert egress["podSelector"]["matchLabels"]["llm-d.ai/role"] == "decode"
    assert sorted(p["port"] for p in egress["egress"][0]["ports"]) == [5600, 8000]
    # The server's own policy admits the scraper to decode's vLLM behind the sidecar.
    assert sorted(p["port"] for p in policies["chat"]["ingress"][0]["ports"]) == [8000, 8200]
    assert not any(name.endswith("-ranks") for name in policies)


def test_the_admission_policies_admit_the_serving_namespace_to_the_nic_claims(pd: RunResult) -> None:
    (policy,) = [
        p.inputs for p in pd.of_type(VAP) if p.inputs["metadata"]["name"] == "gke-gpu-gpu-nic-claims"
    ]
    (validation,) = policy["spec"]["validations"]
    assert 'request.namespace in ["serve-chat"]' in validation["expression"]


def test_each_role_is_scraped_on_vllm_and_kept_by_its_own_budget(pd: RunResult) -> None:
    monitors = {m.inputs["metadata"]["name"]: m.inputs["spec"] for m in pd.of_type(PODMON)}
    assert monitors["chat-prefill"]["endpoints"] == [{"port": 8000, "path": "/metrics", "interval": "15s"}]
    assert monitors["chat-decode"]["endpoints"] == [{"port": 8200, "path": "/metrics", "interval": "15s"}]
    budgets = {
        b.inputs["metadata"]["name"]: b.inputs["spec"]
        for b in pd.of_type("kubernetes:policy/v1:PodDisruptionBudget")
    }
    assert budgets["chat-prefill"]["maxUnavailable"] == 1 and budgets["chat-decode"]["maxUnavailable"] == 1


def test_the_service_without_the_gateway_reaches_decode_alone(pd: RunResult) -> None:
    service = pd.one("kubernetes:core/v1:Service", "serve-chat-service").inputs
    assert service["spec"]["selector"]["llm-d.ai/role"] == "decode"


def test_the_stack_output_says_what_each_role_is_and_how_to_check_the_kv_transfer(pd: RunResult) -> None:
    chat = pd.outputs["serving"]["chat"]
    roles = chat["disaggregation"]["roles"]
    assert (
        roles["prefill"]["workload"] == "deployment/chat-prefill"
        and roles["prefill"]["kvRole"] == "kv_producer"
    )
    assert roles["decode"]["gpusPerReplica"] == 4 and roles["decode"]["replicas"] == 2
    commands = chat["disaggregation"]["commands"]
    assert (
        "grep vllm:nixl_" in commands["kvTransferMetrics"]
        and "localhost:8200/metrics" in commands["kvTransferMetrics"]
    )
    assert commands["sidecar"].endswith("-c routing-proxy")
    assert "gpusPerReplica" not in chat and "replicas" not in chat


def test_the_load_test_goes_through_the_gateway_at_the_guides_lengths_against_its_figures(
    pd: RunResult,
) -> None:
    job = pd.one("kubernetes:batch/v1:Job").inputs
    (client,) = job["spec"]["template"]["spec"]["containers"]
    command = client["command"]
    assert "--gateway=serve-chat/chat" in command and not any(c.startswith("--url=") for c in command)
    assert {"--levels=1,125", "--prompt-words=3846", "--max-tokens=250"} <= set(command)
    # The guide's published figures, as published.
    assert {"--min-output-tok-s=12035.85", "--max-p99-ttft-ms=2010.1", "--max-mean-tpot-ms=5.698"} <= set(
        command
    )
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    role_ = pd.one("kubernetes:rbac.authorization.k8s.io/v1:Role").inputs
    assert role_["rules"] == [
        {
            "apiGroups": ["gateway.networking.k8s.io"],
            "resources": ["gateways"],
            "resourceNames": ["chat"],
            "verbs": ["get"],
        }
    ]
    summary = pd.outputs["serving"]["chat"]["loadTest"]
    assert "third-party" in summary["floors"]["ttftP99Ms"] and "note" in summary


def manifests(result: RunResult) -> list[dict[str, Any]]:
    # Patches (the picker's hardening) are partial objects: not whole manifests.
    return [
        r.inputs
        for r in result.resources
        if r.type.startswith("kubernetes:") and "apiVersion" in r.inputs and not r.type.endswith("Patch")
    ]


@pytest.mark.parametrize("variant", ["pd", "wide"])
def test_every_manifest_validates_against_the_schemas_and_crds(
    variant: str, request: pytest.FixtureRequest
) -> None:
    result = request.getfixturevalue(variant)
    found = manifests(result)
    assert {"ResourceClaimTemplate", "NetworkPolicy", "PodMonitoring"} <= {m["kind"] for m in found}
    for manifest in found:
        validate(manifest)
    # Each workload's Pod template as a Pod, against the cluster version's built-in schema.
    for kind in (DEPLOYMENT, LWS):
        for workload in result.of_type(kind):
            template = pod_of(workload.inputs)
            validate(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "p", **template["metadata"]},
                    "spec": template["spec"],
                }
            )


@pytest.mark.parametrize("variant", ["pd", "wide"])
def test_the_policy_pack_passes_both_variants(variant: str, request: pytest.FixtureRequest) -> None:
    # CI runs the pack over Pulumi.pd.yaml's render; the wide-EP variant has no stack file, so here.
    from tools import check_policies, plan

    report = check_policies.report(plan.to_document(request.getfixturevalue(variant)))
    assert report["checked"] and report["passed"] and report["violations"] == [], report["summary"]


def test_the_wide_ep_variant_runs_data_and_expert_parallel_ranks_as_llm_d_does(wide: RunResult) -> None:
    prefill = wide.one(LWS, "serve-dsr1-prefill-leader-worker-set").inputs
    decode = wide.one(LWS, "serve-dsr1-decode-leader-worker-set").inputs
    for lws in (prefill, decode):
        assert lws["spec"]["replicas"] == 1 and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
        assert "leaderTemplate" not in lws["spec"]["leaderWorkerTemplate"]  # every Pod alike
    vllm = container(pod_of(prefill))
    assert vllm["command"] == [
        "/bin/sh",
        "-c",
        'exec vllm serve "$@" --data-parallel-start-rank=$((LWS_WORKER_INDEX * 8))',
        "vllm",
    ]
    assert {
        "--enable-expert-parallel",
        "--all2all-backend=allgather_reducescatter",
        "--tensor-parallel-size=1",
        "--data-parallel-size=16",
        "--data-parallel-size-local=8",
        "--data-parallel-multi-port-external-lb",
        "--data-parallel-supervisor-port=8008",
        "--data-parallel-address=$(LWS_LEADER_ADDRESS)",
        "--data-parallel-rpc-port=5555",
    } <= set(vllm["args"])
    assert vllm["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8008}
    assert [p["containerPort"] for p in vllm["ports"]] == [*range(8000, 8008), 8008, 5600]
    sidecar = pod_of(decode)["spec"]["initContainers"][0]
    assert {"--data-parallel-size=8", "--enable-prefiller-sampling"} <= set(sidecar["args"])
    assert [p["containerPort"] for p in sidecar["ports"]] == list(range(8000, 8008))
    assert [p["containerPort"] for p in container(pod_of(decode))["ports"]][:8] == list(range(8200, 8208))
    values = wide.one(CHART, "gateway-dsr1-epp").inputs["values"]["router"]["modelServers"]
    assert values["targetPorts"] == [{"number": port} for port in range(8000, 8008)]
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in wide.of_type(NETPOL)}
    # Decode reaches prefill's 8 API ports and the NIXL ports of its 16 ranks; each group its own Pods.
    ports = sorted(p["port"] for p in policies["dsr1-kv-transfer"]["ingress"][0]["ports"])
    assert ports == [*range(5600, 5616), *range(8000, 8008)]
    assert {"dsr1-prefill-ranks", "dsr1-decode-ranks"} <= set(policies)


def test_a_multi_node_replica_on_an_rdma_pool_gets_the_nics_too() -> None:
    """Item 3: tensor and pipeline parallel across nodes leaves TCP where the pool has RDMA NICs."""
    config = example_config()
    config["gke-gpu:serving"] = [
        {
            "name": "big",
            "pool": "a3u",
            "model": "gs://example-gpu-pd-models/llama-3.1-405b",
            "modelInfo": {"catalog": "meta-llama/Llama-3.1-405B-Instruct"},
            "gpusPerReplica": 16,
            "maxModelLen": 16384,
        }
    ]
    config["gke-gpu:workloads"] = []
    result = render_config(config)
    lws = result.one(LWS).inputs["spec"]["leaderWorkerTemplate"]
    for template in (lws["leaderTemplate"], lws["workerTemplate"]):
        assert template["spec"]["resourceClaims"] == [
            {"name": "rdma-nics", "resourceClaimTemplateName": "rdma-8"}
        ]
        vllm = container(template)
        assert env(vllm)["NCCL_SOCKET_IFNAME"] == "eth0" and "UCX_IB_ROCE_REACHABILITY_MODE" not in env(vllm)
    (template,) = [t.inputs for t in result.of_type(RCT)]
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 8
    # A one-node replica of the same pool talks over NVLink only: no NIC.
    config["gke-gpu:serving"][0]["gpusPerReplica"] = 8
    config["gke-gpu:serving"][0]["model"] = "gs://example-gpu-pd-models/llama-3.1-70b"
    config["gke-gpu:serving"][0]["modelInfo"] = {"catalog": "meta-llama/Llama-3.1-70B-Instruct"}
    single = render_config(config)
    assert single.of_type(RCT) == []
    assert "resourceClaims" not in pod_of(single.one(DEPLOYMENT).inputs)["spec"]


def test_a_multinetwork_pool_gives_whole_node_roles_the_interfaces() -> None:
    config = example_config()
    config["gke-gpu:gpuPools"][0]["gpudirectNetworking"] = "multiNetwork"
    config["gke-gpu:network"] = {"gpudirectCidr": "192.168.0.0/16"}
    config["gke-gpu:serving"][0]["disaggregation"] = {
        "prefill": {"replicas": 1, "gpusPerReplica": 8},
        "decode": {"replicas": 1, "gpusPerReplica": 8},
    }
    result = render_config(config)
    for name in ("prefill", "decode"):
        annotations = pod_of(role(result, name))["metadata"]["annotations"]
        interfaces = json.loads(annotations["networking.gke.io/interfaces"])
        assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
        assert [i["network"] for i in interfaces[2:]] == [f"rdma-{i}" for i in range(8)]
    # The GPU networks' admission policy (evaluated as the API server does: tests/admission_eval.py)
    # admits the roles' Pods in their namespace and nowhere else.
    from tests.admission_eval import evaluate

    policy, binding = _policy(result, "gke-gpu-gpu-networks")
    for name in ("prefill", "decode"):
        template = pod_of(role(result, name))
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}
        assert evaluate(policy, binding, pod, "serve-chat").admitted
        assert not evaluate(policy, binding, pod, "default").admitted


def test_tcp_is_a_choice_said_with_its_cost_and_opens_every_port_between_the_roles() -> None:
    config = example_config()
    config["gke-gpu:serving"][0]["disaggregation"]["kvTransport"] = "tcp"
    result = render_config(config)
    assert result.of_type(RCT) == []
    assert any("kvTransport: tcp: the KV cache" in w for w in result.warnings)
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in result.of_type(NETPOL)}
    assert "ports" not in policies["chat-kv-transfer"]["ingress"][0]


def _policy(result: RunResult, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (policy,) = [p.inputs["spec"] for p in result.of_type(VAP) if p.inputs["metadata"]["name"] == name]
    (binding,) = [
        b.inputs["spec"]
        for b in result.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
        if b.inputs["metadata"]["name"] == name
    ]
    return policy, binding


def test_the_admission_policies_admit_exactly_the_serving_pods_to_the_nics(pd: RunResult) -> None:
    """The cluster's policies (evaluated as the API server does: tests/admission_eval.py) admit the
    service's NIC claim templates in its namespace and the same objects nowhere else."""
    from tests.admission_eval import evaluate

    policy, binding = _policy(pd, "gke-gpu-gpu-nic-claims")
    for template in pd.of_type(RCT):
        manifest = {**template.inputs, "kind": "ResourceClaimTemplate"}
        assert evaluate(policy, binding, manifest, "serve-chat").admitted
        assert not evaluate(policy, binding, manifest, "someone-else").admitted
