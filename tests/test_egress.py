"""Default-deny egress in the team and serving namespaces (issue 27): every such namespace has it, the
exceptions are exactly the listed ones, and the all-reduce, the model server, its load test and its
endpoint picker still reach what they use. Evaluated with tests/egress_eval.py over the rendered
NetworkPolicies, the Pods' own labels and the ports they use."""

from typing import Any

import pytest

from tests.conftest import L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config, stack_render
from tests.egress_eval import KUBE_DNS, Pod, egress_allowed, reaches_dns
from tools.offline import RunResult

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
# Addresses outside the cluster: a Google API front end, a public resolver, a host of the VPC.
GOOGLE_API, PUBLIC_DNS, VPC_HOST = "142.250.1.1", "8.8.8.8", "10.10.0.7"
METADATA, GKE_METADATA_SERVER = "169.254.169.254", "169.254.169.252"


def policies(result: RunResult) -> list[dict[str, Any]]:
    return [r.inputs for r in result.of_type(POLICY)]


def namespaces(result: RunResult) -> list[dict[str, Any]]:
    return [r.inputs["metadata"] for r in result.of_type(NAMESPACE)]


def template_labels(result: RunResult, type_token: str) -> dict[str, str]:
    (workload,) = result.of_type(type_token)
    return workload.inputs["spec"]["template"]["metadata"]["labels"]


def allreduce_pod(result: RunResult) -> tuple[str, dict[str, str]]:
    (jobset,) = result.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    (replicated,) = jobset.inputs["spec"]["replicatedJobs"]
    template = replicated["template"]["spec"]["template"]
    return jobset.inputs["metadata"]["namespace"], template["metadata"]["labels"]


@pytest.fixture(scope="module")
def train() -> RunResult:
    return stack_render("train")


@pytest.fixture(scope="module")
def serve() -> RunResult:
    return stack_render("serve")


def _team_namespaces(result: RunResult) -> list[str]:
    return [
        m["name"]
        for m in namespaces(result)
        if {"gke-gpu/team", "gke-gpu/gpudirect-team"} & set(m.get("labels", {}))
    ]


def test_every_team_and_serving_namespace_denies_egress_by_default(
    train: RunResult, serve: RunResult
) -> None:
    teams = _team_namespaces(train)
    assert sorted(teams) == ["gpudirect-platform", "gpudirect-research", "platform", "research"]
    serving = [m["name"] for m in namespaces(serve) if m["name"].startswith("serve-")]
    assert serving == ["serve-chat"]
    for result, names in ((train, teams), (serve, serving)):
        for namespace in names:
            (deny,) = [
                p
                for p in policies(result)
                if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == "default-deny-egress"
            ]
            assert deny["spec"]["podSelector"] == {} and deny["spec"]["policyTypes"] == ["Egress"], namespace
            # A Pod of no workload of ours: what the namespace lets any Pod send.
            stranger = {"app": "anything"}
            assert reaches_dns(policies(result), namespace, stranger), namespace
            for address, port in ((PUBLIC_DNS, 53), (GOOGLE_API, 443), (VPC_HOST, 22), ("1.1.1.1", 80)):
                assert not egress_allowed(policies(result), namespace, stranger, address, port), (
                    namespace,
                    address,
                )


def test_team_pods_reach_exactly_dns_their_namespace_and_the_metadata_server(train: RunResult) -> None:
    rendered = policies(train)
    for namespace in _team_namespaces(train):
        job = {"job-name": "train-0"}
        # Their own namespace's Pods on any port (a job's ranks: sshd, NCCL's bootstrap, a store).
        for port in (22, 222, 29500, 45678):
            assert egress_allowed(rendered, namespace, job, Pod(namespace, {"job-name": "train-1"}), port)
        # Workload Identity's tokens: where the Pod asks and the GKE metadata server that answers.
        assert egress_allowed(rendered, namespace, job, METADATA, 80)
        assert egress_allowed(rendered, namespace, job, GKE_METADATA_SERVER, 988)
        assert reaches_dns(rendered, namespace, job)
        # Nothing else: another team's Pods, other metadata ports, DNS elsewhere, the internet, the VPC.
        other = "platform" if namespace != "platform" else "research"
        assert not egress_allowed(rendered, namespace, job, Pod(other, {"job-name": "x"}), 22)
        assert not egress_allowed(rendered, namespace, job, KUBE_DNS, 8080)
        assert not egress_allowed(rendered, namespace, job, METADATA, 8080)
        assert not egress_allowed(rendered, namespace, job, GKE_METADATA_SERVER, 80)
        for address, port in ((PUBLIC_DNS, 53), (GOOGLE_API, 443), (VPC_HOST, 443), ("1.1.1.1", 80)):
            assert not egress_allowed(rendered, namespace, job, address, port), (namespace, address, port)


def test_the_allreduce_reaches_its_peers_and_dns_and_nothing_else(train: RunResult) -> None:
    rendered = policies(train)
    namespace, labels = allreduce_pod(train)
    peer = Pod(namespace, labels)
    # Rank 0's ssh to the others (222 in Google's images, else 22) and NCCL's bootstrap on eth0, the
    # Pod network (NCCL_SOCKET_IFNAME); the GPU NICs carry the data outside any NetworkPolicy.
    for port in (222, 22, 40000, 61000):
        assert egress_allowed(rendered, namespace, labels, peer, port)
    assert reaches_dns(rendered, namespace, labels)
    assert not egress_allowed(rendered, namespace, labels, PUBLIC_DNS, 53, "UDP")
    assert not egress_allowed(rendered, namespace, labels, GOOGLE_API, 443)
    # The same Pods in a team's GPUDirect namespace (where the teams run theirs) reach each other too.
    assert egress_allowed(rendered, "gpudirect-research", labels, Pod("gpudirect-research", labels), 40000)


def test_the_server_reaches_its_bucket_and_nothing_else(serve: RunResult) -> None:
    rendered = policies(serve)
    server = template_labels(serve, "kubernetes:apps/v1:Deployment")
    # Cloud Storage FUSE: Google's APIs over HTTPS and Workload Identity's tokens.
    assert egress_allowed(rendered, "serve-chat", server, GOOGLE_API, 443)
    assert egress_allowed(rendered, "serve-chat", server, METADATA, 80)
    assert egress_allowed(rendered, "serve-chat", server, GKE_METADATA_SERVER, 988)
    assert reaches_dns(rendered, "serve-chat", server)
    for address, port in ((VPC_HOST, 443), ("172.16.0.2", 443), ("100.64.0.9", 443), (GOOGLE_API, 80)):
        assert not egress_allowed(rendered, "serve-chat", server, address, port), (address, port)
    # One node a replica: no Pod-to-Pod traffic of its own.
    assert not egress_allowed(rendered, "serve-chat", server, Pod("serve-chat", server), 8000)


def test_the_load_test_reaches_the_server_and_dns_only(serve: RunResult) -> None:
    rendered = policies(serve)
    server = template_labels(serve, "kubernetes:apps/v1:Deployment")
    load = template_labels(serve, "kubernetes:batch/v1:Job")
    assert egress_allowed(rendered, "serve-chat", load, Pod("serve-chat", server), 8000)
    assert reaches_dns(rendered, "serve-chat", load)
    # DNS to GKE's resolvers only (it was port 53 at any address).
    assert not egress_allowed(rendered, "serve-chat", load, PUBLIC_DNS, 53, "UDP")
    assert not egress_allowed(rendered, "serve-chat", load, GOOGLE_API, 443)
    assert not egress_allowed(rendered, "serve-chat", load, METADATA, 80)


CHAT = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen2.5-1.5b-instruct"}


def test_the_endpoint_picker_reaches_the_servers_metrics_and_the_api() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            network={"proxyOnlyCidr": "10.10.16.0/23"},
            gpuPools=[{**L4_POOL, "driverVersion": "LATEST"}],
            serving=[{**CHAT, "gateway": True}],
        )
    )
    rendered = policies(result)
    server = template_labels(result, "kubernetes:apps/v1:Deployment")
    (policy,) = [p for p in rendered if p["metadata"]["name"] == "chat-epp-egress"]
    picker = policy["spec"]["podSelector"]["matchLabels"]
    assert picker == {"llm-d-router-gateway": "chat-epp"}  # the chart's EPP Pod labels (gateway.py)
    assert egress_allowed(rendered, "serve-chat", picker, Pod("serve-chat", server), 8000)
    assert egress_allowed(rendered, "serve-chat", picker, "172.16.0.2", 443)  # the control plane
    assert reaches_dns(rendered, "serve-chat", picker)
    assert not egress_allowed(rendered, "serve-chat", picker, Pod("serve-chat", server), 9000)
    assert not egress_allowed(rendered, "serve-chat", picker, METADATA, 80)


def test_a_huggingface_model_is_downloaded_over_https_without_the_metadata_server() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[{**L4_POOL, "driverVersion": "LATEST"}],
            serving=[{"name": "chat", "pool": "l4", "model": "Qwen/Qwen2.5-1.5B-Instruct"}],
        )
    )
    rendered = policies(result)
    server = template_labels(result, "kubernetes:apps/v1:Deployment")
    assert egress_allowed(rendered, "serve-chat", server, "18.160.1.1", 443)  # huggingface.co's CDN
    assert not egress_allowed(rendered, "serve-chat", server, METADATA, 80)
    assert not egress_allowed(rendered, "serve-chat", server, VPC_HOST, 443)


TEAM = {"name": "research", "pools": {"l4": {"gpus": 1}}}


def test_a_teams_egress_entries_open_exactly_what_they_name() -> None:
    egress = [
        {"cidr": "0.0.0.0/0", "excluding": ["10.0.0.0/8", "172.16.0.0/12"], "ports": [443]},
        {"cidr": "10.30.0.0/16", "protocol": "UDP"},
    ]
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4_POOL],
            batch={"kueue": True, "teams": [{**TEAM, "egress": egress}]},
        )
    )
    rendered = policies(result)
    job = {"job-name": "j"}
    assert egress_allowed(rendered, "research", job, GOOGLE_API, 443)
    assert not egress_allowed(rendered, "research", job, GOOGLE_API, 80)
    assert not egress_allowed(rendered, "research", job, VPC_HOST, 443)
    assert egress_allowed(rendered, "research", job, "10.30.4.4", 5000, "UDP")
    assert not egress_allowed(rendered, "research", job, "10.30.4.4", 5000, "TCP")


@pytest.mark.parametrize(
    ("egress", "expected"),
    [
        (
            [{"cidr": "10.0.0.1/8"}],
            "gke-gpu:batch.teams[0].egress[0].cidr: '10.0.0.1/8' is not an IPv4 CIDR block",
        ),
        (
            [{"cidr": "10.0.0.0/8", "excluding": ["192.168.0.0/16"]}],
            "gke-gpu:batch.teams[0].egress[0].excluding[0]: '192.168.0.0/16' is not inside 10.0.0.0/8",
        ),
        (
            [{"cidr": "10.0.0.0/8", "excluding": ["10.0.0.0/8"]}],
            "gke-gpu:batch.teams[0].egress[0].excluding[0]: '10.0.0.0/8' is not inside 10.0.0.0/8",
        ),
        (
            [{"cidr": "0.0.0.0/0", "ports": [443, 80, 443]}],
            "gke-gpu:batch.teams[0].egress[0].ports: 443 listed twice",
        ),
        ([{"cidr": "0.0.0.0/0", "ports": [70000]}], "gke-gpu:batch.teams[0].egress[0].ports[0]"),
        ([{"cidr": "0.0.0.0/0", "protocol": "ICMP"}], "gke-gpu:batch.teams[0].egress[0].protocol"),
        ([{"cidr": "example.com"}], "gke-gpu:batch.teams[0].egress[0].cidr: 'example.com'"),
    ],
)
def test_bad_egress_entries_are_refused_with_the_key(egress: list[dict[str, Any]], expected: str) -> None:
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4_POOL],
            "batch": {"kueue": True, "teams": [{**TEAM, "egress": egress}]},
        }
    )
    assert expected in message, message


def test_every_problem_in_egress_is_listed_in_one_run() -> None:
    egress = [{"cidr": "10.0.0.1/8"}, {"cidr": "0.0.0.0/0", "ports": [22, 22]}]
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4_POOL],
            "batch": {"kueue": True, "teams": [{**TEAM, "egress": egress}]},
        }
    )
    assert "egress[0].cidr" in message and "egress[1].ports" in message, message


def test_the_component_refuses_bad_egress_by_its_arg() -> None:
    from gke_gpu.core.validation import InvalidArgsError
    from gke_gpu.workloads.batch_queues import GpuBatchQueues

    queue = {
        "name": "l4",
        "node_labels": {"cloud.google.com/gke-nodepool": "l4"},
        "tolerations": [],
        "gpus": 2,
        "cpus": 16,
        "memory_gib": 64,
        "ephemeral_storage_gib": 100,
    }
    team = {
        "name": "research",
        "namespace": "research",
        "egress": [{"cidr": "10.0.0.0/8", "excluding": ["11.0.0.0/8"]}],
    }
    with pytest.raises(InvalidArgsError) as info:
        GpuBatchQueues("b", queues=[queue], teams=[team])
    assert "teams[0].egress[0].excluding[0]" in str(info.value)
