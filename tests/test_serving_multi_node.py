"""Model servers whose replica spans nodes: a LeaderWorkerSet (v0.10.0, vendored CRD) of a leader
running vLLM's API server and headless workers, one Pod per node, and the LWS controller once per
cluster. The example is docs/serving.md's, "Multi-node replicas"."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.serving.lws_controller import LeaderWorkerSetController
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    STANDARD_CLUSTER,
    config_error,
    render,
    service_args,
    stack_config,
)
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

DOCS = Path(__file__).resolve().parent.parent / "docs" / "serving.md"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
CHART = "kubernetes:helm.sh/v4:Chart"
CONTROLLER = "gke-gpu:index:LeaderWorkerSetController"
ROLE = "gke-gpu/role"
MULTI_NODE_ARGS = [
    "--pipeline-parallel-size=2",
    "--distributed-executor-backend=mp",
    "--nnodes=2",
    "--node-rank=$(LWS_WORKER_INDEX)",
    "--master-addr=$(LWS_LEADER_ADDRESS)",
]


def _docs_example() -> dict[str, Any]:
    """The stack file example of docs/serving.md's multi-node section, its bucket filled in."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.DOTALL)
    (block,) = [b for b in blocks if "gpusPerReplica: 16" in b and "llama-405b" in b]
    return yaml.safe_load(block.replace("<your-bucket>", "models-bucket"))


EXAMPLE = _docs_example()
(H100,) = EXAMPLE["gke-gpu:gpuPools"]
(BIG,) = EXAMPLE["gke-gpu:serving"]


@pytest.fixture(scope="module")
def multi() -> RunResult:
    return render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[H100], serving=[BIG]))


def group(result: RunResult) -> dict[str, Any]:
    return result.one(LWS).inputs


def pods(result: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """The leader's and the worker's Pod templates."""
    template = group(result)["spec"]["leaderWorkerTemplate"]
    return template["leaderTemplate"], template["workerTemplate"]


def test_the_docs_example_is_a_leader_worker_set_of_two_nodes_a_replica(multi: RunResult) -> None:
    assert multi.of_type("kubernetes:apps/v1:Deployment") == []
    lws = group(multi)
    assert lws["metadata"]["name"] == "llama-405b-lws" and lws["metadata"]["namespace"] == "serve-llama-405b"
    spec = lws["spec"]
    assert "replicas" not in spec  # the autoscaler's alone (rollout.py)
    assert spec["leaderWorkerTemplate"]["size"] == 2
    assert spec["startupPolicy"] == "LeaderCreated"  # LeaderReady would wait for a leader that waits
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert spec["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
    }
    annotations = lws["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"] == "condition=Available"
    assert annotations["pulumi.com/timeoutSeconds"] == "2700"
    assert "pulumi.com/patchForce" not in annotations  # no count sent, nothing to force


def test_every_manifest_is_valid_the_group_against_the_vendored_crd(multi: RunResult) -> None:
    manifests = [
        r.inputs for r in multi.resources if r.type.startswith("kubernetes:") and "apiVersion" in r.inputs
    ]
    assert "LeaderWorkerSet" in {m["kind"] for m in manifests}
    for manifest in manifests:
        validate(manifest)
    # The templates as Pods too: the built-in schema of the cluster's version, strict.
    for template in pods(multi):
        validate(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **template["metadata"]}, **template}
        )


def test_the_leader_runs_the_api_with_tensor_parallel_in_the_node_and_pipeline_across() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[H100], serving=[BIG]))
    leader, _ = pods(result)
    assert leader["metadata"]["labels"][ROLE] == "leader"
    assert leader["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    # The H100 pool's bundled Local SSD: the file cache on disk, at its 1 TiB cap.
    assert leader["metadata"]["annotations"]["gke-gcsfuse/ephemeral-storage-request"] == "1024Gi"
    (vllm,) = leader["spec"]["containers"]
    assert vllm["args"] == [
        "/models",
        "--served-model-name=llama-405b",
        "--tensor-parallel-size=8",
        "--host=0.0.0.0",
        "--port=8000",
        "--max-model-len=16384",
        *MULTI_NODE_ARGS,
    ]
    assert vllm["resources"]["limits"]["nvidia.com/gpu"] == "8"  # a node's, not the replica's 16
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert vllm[probe]["httpGet"] == {"path": "/health", "port": 8000}


def test_each_pod_is_the_single_node_servers_pod_for_a_whole_node(multi: RunResult) -> None:
    """Same security context, weights volume, home and shm, resources, node selector and tolerations
    as a one-node replica of the node's 8 GPUs; only the multi-node arguments differ."""
    single = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[H100], serving=[{**BIG, "gpusPerReplica": 8}])
    )
    one_node = single.one("kubernetes:apps/v1:Deployment").inputs["spec"]["template"]
    leader, worker = pods(multi)
    assert (
        leader["metadata"]["annotations"]
        == worker["metadata"]["annotations"]
        == one_node["metadata"]["annotations"]
    )
    for role, template in (("leader", leader), ("worker", worker)):
        assert template["metadata"]["labels"] == {**one_node["metadata"]["labels"], ROLE: role}
    expected = one_node["spec"]
    (expected_vllm,) = expected["containers"]
    leader_vllm, worker_vllm = leader["spec"]["containers"][0], worker["spec"]["containers"][0]
    assert leader_vllm["args"] == [*expected_vllm["args"], *MULTI_NODE_ARGS]
    assert worker_vllm["args"] == [*expected_vllm["args"], *MULTI_NODE_ARGS, "--headless"]
    probes_and_port = {"startupProbe", "readinessProbe", "livenessProbe", "ports"}
    assert {k: v for k, v in leader_vllm.items() if k != "args"} == {
        k: v for k, v in expected_vllm.items() if k != "args"
    }
    assert {k: v for k, v in worker_vllm.items() if k != "args"} == {
        k: v for k, v in expected_vllm.items() if k not in probes_and_port | {"args"}
    }
    for pod in (leader["spec"], worker["spec"]):
        others = {k: v for k, v in pod.items() if k not in ("containers", "affinity")}
        assert others == {k: v for k, v in expected.items() if k != "containers"}
    weights = next(v for v in worker["spec"]["volumes"] if v["name"] == "weights")
    assert weights["csi"]["driver"] == "gcsfuse.csi.storage.gke.io" and weights["csi"]["readOnly"] is True


def test_a_worker_runs_headless_in_its_leaders_zone(multi: RunResult) -> None:
    _, worker = pods(multi)
    assert worker["metadata"]["labels"][ROLE] == "worker"
    (vllm,) = worker["spec"]["containers"]
    assert vllm["args"][-1] == "--headless"
    assert not {"ports", "startupProbe", "readinessProbe", "livenessProbe"} & set(vllm)
    (term,) = worker["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "topology.kubernetes.io/zone"
    assert term["labelSelector"] == {
        "matchLabels": {
            "app.kubernetes.io/name": "llama-405b",
            "app.kubernetes.io/instance": "llama-405b",
            ROLE: "leader",
        }
    }
    assert term["matchLabelKeys"] == ["leaderworkerset.sigs.k8s.io/group-key"]  # its own group's leader


def test_the_service_and_the_scraper_see_leaders_and_the_group_talks_on_any_port(multi: RunResult) -> None:
    service = multi.one("kubernetes:core/v1:Service").inputs
    assert service["metadata"]["name"] == "llama-405b"  # the same URL as with one node
    assert service["spec"]["selector"][ROLE] == "leader"
    monitoring = multi.one("kubernetes:monitoring.googleapis.com/v1:PodMonitoring").inputs["spec"]
    assert monitoring["selector"]["matchLabels"][ROLE] == "leader"
    policy = multi.one(
        "kubernetes:networking.k8s.io/v1:NetworkPolicy", "serve-llama-405b-network-policy"
    ).inputs["spec"]
    api, group_rule = policy["ingress"]
    assert api["ports"] == [{"port": 8000, "protocol": "TCP"}]
    own = {"app.kubernetes.io/name": "llama-405b", "app.kubernetes.io/instance": "llama-405b"}
    assert group_rule == {"from": [{"podSelector": {"matchLabels": own}}]}  # every port, own Pods only
    assert policy["podSelector"] == {"matchLabels": own}


def test_the_autoscaler_scales_the_leader_worker_set_by_whole_groups(multi: RunResult) -> None:
    hpa = multi.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler").inputs
    validate(hpa)
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "llama-405b-lws",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 2)
    assert multi.one("gke-gpu:index:CustomMetricsAdapter")


def test_the_controller_is_installed_once_pinned_and_hardened() -> None:
    second = {**BIG, "name": "other", "replicas": {"min": 1, "max": 1}}
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[{**H100, "maxNodes": 6}], serving=[BIG, second])
    )
    controller = result.one(CONTROLLER)
    assert {r.type for r in result.children_of(controller)} == {CHART, "kubernetes:core/v1:Namespace"}
    chart = result.one(CHART).inputs
    assert (chart["chart"], chart["version"], chart["namespace"]) == (
        "oci://registry.k8s.io/lws/charts/lws",
        "0.10.0",
        "lws-system",
    )
    values = chart["values"]
    assert values["image"]["manager"] == {
        "repository": "registry.k8s.io/lws/lws",
        "tag": "v0.10.0",
        "pullPolicy": "IfNotPresent",
    }
    assert values["podSecurityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert values["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert values["resources"]["limits"] == values["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    namespace = result.one("kubernetes:core/v1:Namespace", "leader-worker-set-namespace").inputs
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    validate(namespace)
    assert len(result.of_type(LWS)) == 2


def test_one_node_services_get_no_controller() -> None:
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[H100], serving=[{**BIG, "gpusPerReplica": 8}])
    )
    assert result.of_type(CONTROLLER) == [] and result.of_type(LWS) == []


def test_the_services_wait_for_the_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    from gke_gpu.stack import program_serving

    declared: dict[str, Any] = {}
    real = program_serving.declare

    def recording(cls: type, name: str, args: Any, opts: Any = None, **section: Any) -> Any:
        component = real(cls, name, args, opts=opts, **section)
        declared[name] = (component, opts)
        return component

    monkeypatch.setattr(program_serving, "declare", recording)
    one_node = {**BIG, "name": "small", "gpusPerReplica": 8, "replicas": {"min": 1, "max": 1}}
    pools = [{**H100, "maxNodes": 6}]
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=pools, serving=[BIG, one_node]))
    assert result.error is None
    controller, _ = declared["leader-worker-set"]
    assert controller in declared["serve-llama-405b"][1].depends_on
    assert controller not in declared["serve-small"][1].depends_on


def test_the_output_says_how_the_replica_is_laid_out_and_how_to_follow_it(multi: RunResult) -> None:
    out = multi.outputs["serving"]["llama-405b"]
    assert out["url"] == "http://llama-405b.serve-llama-405b.svc:8000"
    assert out["nodesPerReplica"] == 2 and out["gpusPerReplica"] == 16
    assert "tensor parallel 8 within each node, pipeline parallel 2 across them" in out["layout"]
    commands = out["commands"]
    assert commands["wait"] == (
        "kubectl wait -n serve-llama-405b leaderworkerset/llama-405b-lws --for=condition=Available "
        "--timeout=45m"
    )
    assert commands["logs"] == "kubectl logs -n serve-llama-405b llama-405b-lws-0 -c vllm"
    assert commands["workerLogs"] == "kubectl logs -n serve-llama-405b llama-405b-lws-0-1 -c vllm"


def test_the_cost_estimate_prices_a_replica_as_its_nodes() -> None:
    from tools import cost, plan

    # Two g2-standard-8 nodes of one L4 a replica (the price table has L4 prices).
    l4 = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 4, "driverVersion": "LATEST"}
    fixed = {**BIG, "pool": "l4", "gpusPerReplica": 2, "replicas": {"min": 2, "max": 2}}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[l4], serving=[fixed]))
    assert result.one(LWS).inputs["spec"]["leaderWorkerTemplate"]["size"] == 2
    estimate = cost.estimate(plan.to_document(result))
    (pool,) = estimate["pools"]
    (service,) = estimate["services"]
    node = pool["nodeHourly"]["onDemand"]
    assert abs(service["replicaHourly"] - 2 * node) < 0.01
    assert abs(service["hourlyAtMax"] - 4 * node) < 0.01
    assert "a replica (2 GPU(s) on 2 nodes)" in "\n".join(cost.format_table(estimate))


MIG = {**H100, "migPartitionSize": "3g.40gb"}
SHARED = {**H100, "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2}}


@pytest.mark.parametrize(
    ("cluster", "pool", "service", "expected"),
    [
        (
            STANDARD_CLUSTER,
            H100,
            {**BIG, "gpusPerReplica": 12},
            "gke-gpu:serving[0].gpusPerReplica: 12 is not a whole multiple of pool h100's 8 GPUs per node: "
            "a replica larger than a node takes whole nodes",
        ),
        (STANDARD_CLUSTER, H100, {**BIG, "gpusPerReplica": 20}, "use 16 or 24"),
        (
            STANDARD_CLUSTER,
            MIG,
            BIG,
            "gke-gpu:serving[0].gpusPerReplica: 16 is not allowed on pool h100, which partitions each GPU",
        ),
        (STANDARD_CLUSTER, SHARED, BIG, "gke-gpu:serving[0].pool: 'h100' shares its GPUs (TIME_SHARING)"),
        (
            STANDARD_CLUSTER,
            H100,
            {**BIG, "replicas": {"min": 1, "max": 3}},
            "gke-gpu:serving[0].replicas: the services on pool h100 need 48 GPUs (llama-405b 3 x 16), more "
            "than its 32 (maxNodes 4 x 8)",
        ),
        (
            AUTOPILOT_CLUSTER,
            {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "driverVersion": "LATEST"},
            BIG,
            "gke-gpu:serving[0].gpusPerReplica: 16 is more than Autopilot profile h100's 8 GPUs per Pod "
            "(gpusPerNode): raise its gpusPerNode to 16",
        ),
        (STANDARD_CLUSTER, H100, {**BIG, "gpusPerReplica": 72}, "gke-gpu:serving[0].gpusPerReplica: 72"),
    ],
)
def test_bad_multi_node_services_are_refused_with_the_key(
    cluster: dict[str, Any], pool: dict[str, Any], service: dict[str, Any], expected: str
) -> None:
    message = config_error({"cluster": cluster, "gpuPools": [pool], "serving": [service]})
    assert expected in message, message


def test_two_independent_problems_are_both_reported_and_nothing_else() -> None:
    services = [{**BIG, "gpusPerReplica": 12}, {**BIG, "name": "other", "gpusPerReplica": 10}]
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [H100], "serving": services})
    assert "serving[0].gpusPerReplica: 12 is not a whole multiple" in message
    assert "serving[1].gpusPerReplica: 10 is not a whole multiple" in message
    assert message.count("gke-gpu:serving") == 2, message


ARGS = service_args("h100", "gs://models-bucket/llama")


def test_the_component_refuses_a_replica_that_is_not_whole_nodes() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("big", {**ARGS, "gpus_per_replica": 12, "gpus_per_node": 8})
    assert "gpus_per_replica: 12 is not a whole multiple of gpus_per_node 8" in str(refused.value)
    with pytest.raises(InvalidArgsError, match="gpus_per_node"):
        InferenceService.check_args("big", {**ARGS, "gpus_per_replica": 16, "gpus_per_node": 0})
    spec = InferenceService.check_args("big", {**ARGS, "gpus_per_replica": 4, "gpus_per_node": 8})
    assert (spec.gpus_per_pod, spec.nodes_per_replica) == (4, 1)  # fits one node: a Deployment


def test_the_controller_checks_its_size() -> None:
    with pytest.raises(InvalidArgsError, match="memory_gib"):
        LeaderWorkerSetController.check_args("lws", {"memory_gib": 0})
    spec = LeaderWorkerSetController.check_args("lws", {})
    assert (spec.cpu, spec.memory_gib) == (1, 1)


def test_the_policy_pack_passes_the_multi_node_render(multi: RunResult) -> None:
    from tools import check_policies, plan

    report = check_policies.report(plan.to_document(multi))
    assert report["passed"] and report["violations"] == [], report["summary"]


def test_a_multi_node_service_caches_one_nodes_share_per_pod() -> None:
    pool = {
        "name": "l4",
        "accelerator": "nvidia-l4",
        "gpusPerNode": 4,
        "maxNodes": 8,
        "driverVersion": "LATEST",
    }
    service = {"name": "big", "pool": "l4", "model": "gs://models-bucket/m", "gpusPerReplica": 16}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[service]))
    group = result.one("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet").inputs
    template = group["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    # g2-standard-48 (4 GPUs), a Pod a whole node of the replica's four, the model's size unknown: what
    # the node's 200 GB (186 GiB) boot disk leaves Pods (96 GiB), 10% under it, less the container's 50.
    assert template["metadata"]["annotations"]["gke-gcsfuse/ephemeral-storage-request"] == "36Gi"
    assert "file cache 36 GiB on the node's boot disk" in result.outputs["serving"]["big"]["weights"]


def test_a_multi_node_services_gateway_pools_its_leaders_only() -> None:
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[H100], serving=[{**BIG, "gateway": True}])
    )
    name = BIG["name"]
    chart = next(r for r in result.resources if r.type == CHART and r.name == f"gateway-{name}-epp").inputs
    selector = chart["values"]["router"]["modelServers"]["matchLabels"]
    # Workers run no API server: the pool takes the leaders, as the service's own Service does.
    assert selector[ROLE] == "leader"
    service = result.one("kubernetes:core/v1:Service", f"serve-{name}-service").inputs
    assert selector == service["spec"]["selector"]


def test_a_replica_split_over_nodes_a_bigger_machine_would_hold_is_noted() -> None:
    from gke_gpu.stack.config import parse_settings

    l4 = {
        "name": "l4",
        "accelerator": "nvidia-l4",
        "gpusPerNode": 1,
        "maxNodes": 4,
        "driverVersion": "LATEST",
    }
    raw = {
        "cluster": STANDARD_CLUSTER,
        "gpuPools": [l4],
        "serving": [{**BIG, "pool": "l4", "gpusPerReplica": 2}],
    }
    _, notes = parse_settings(raw, project="p-123456", region="us-central1", stack="test")
    (note,) = [n for n in notes if "gpusPerReplica" in n]
    assert "2 spans 2 nodes of pool l4 (1 GPUs each)" in note
    assert "nvidia-l4 machines with 2 GPUs would keep a replica on one node" in note
    # The docs' 405B example: no H100 machine has 16 GPUs, so nothing to say.
    _, notes = parse_settings(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [H100], "serving": [BIG]},
        project="p-123456",
        region="us-central1",
        stack="test",
    )
    assert not [n for n in notes if "gpusPerReplica" in n]
