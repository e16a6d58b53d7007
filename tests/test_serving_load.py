"""The serving load test (`workloads: [{name: serving-load, service: ...}]`, ServingLoadTest): a bounded
Job on a CPU node that loads a model server and judges it against floors per GPU type."""

import shlex

import pytest

from gke_gpu.core import images
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.load_floors import FLOORS, default_floors
from gke_gpu.serving.load_test import SCRIPTS, ServingLoadTest
from tests.conftest import L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tests.egress_eval import EGRESS_TO_DNS
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

L4 = {**L4_POOL, "driverVersion": "LATEST"}
CHAT = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen2.5-1.5b-instruct"}
JOB = "kubernetes:batch/v1:Job"
LOAD = {"name": "serving-load", "service": "chat"}


@pytest.fixture(scope="module")
def loaded() -> RunResult:
    return render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT], workloads=[LOAD]))


def job(result: RunResult) -> dict:
    return result.one(JOB, "serving-load-chat-job").inputs


def test_the_job_loads_the_service_and_judges_it_against_the_gpus_floors(loaded: RunResult) -> None:
    spec = job(loaded)
    assert spec["metadata"]["namespace"] == "serve-chat" and spec["metadata"]["name"] == "serving-load"
    (container,) = spec["spec"]["template"]["spec"]["containers"]
    # Through the stack's Docker Hub mirror (ImageMirror): an official image lives under library/.
    assert container["image"] == f"us-central1-docker.pkg.dev/test-project/docker-hub/library/{images.PYTHON}"
    assert container["command"] == [
        "python3",
        "/opt/serving-load/serving_load.py",
        "--url=http://chat.serve-chat.svc:8000",
        "--model=chat",
        "--levels=1,4,16",
        "--wait-s=2700",
        "--min-output-tok-s=120",
        "--max-p99-ttft-ms=6000",
        "--max-mean-tpot-ms=130",
        "--label=chat on nvidia-l4",
    ]
    floors = loaded.outputs["serving"]["chat"]["loadTest"]["floors"]
    assert floors["outputTokensPerSecond"] == "120 (estimate for nvidia-l4)"
    scripts = loaded.one("kubernetes:core/v1:ConfigMap", "serving-load-chat-scripts").inputs["data"]
    assert scripts == SCRIPTS and set(scripts) == {"serving_load.py", "vllm_bench_judge.py"}


def test_the_job_is_bounded_and_keeps_no_gpu_node_up(loaded: RunResult) -> None:
    spec = job(loaded)
    assert spec["spec"]["backoffLimit"] == 0
    assert spec["spec"]["activeDeadlineSeconds"] == 3600
    assert spec["spec"]["ttlSecondsAfterFinished"] == 86400
    assert spec["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    pod = spec["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # No GPU, no toleration of the GPU taint, no GPU node selector: it lands on a CPU node.
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert not pod.get("tolerations") and not pod.get("nodeSelector")
    assert container["resources"]["limits"] == container["resources"]["requests"]
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["capabilities"] == {"drop": ["ALL"]}


def test_the_job_reaches_only_the_server_and_dns(loaded: RunResult) -> None:
    policy = loaded.one("kubernetes:networking.k8s.io/v1:NetworkPolicy", "serving-load-chat-network-policy")
    assert policy.inputs["metadata"]["name"] == "serving-load-chat"
    spec = policy.inputs["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in spec
    to_server, dns = spec["egress"]
    server_selector = loaded.one("kubernetes:apps/v1:Deployment").inputs["spec"]["selector"]["matchLabels"]
    assert to_server["to"] == [{"podSelector": {"matchLabels": server_selector}}]
    assert to_server["ports"] == [{"port": 8000, "protocol": "TCP"}]
    assert dns == EGRESS_TO_DNS
    job_labels = job(loaded)["spec"]["template"]["metadata"]["labels"]
    assert all(job_labels[k] == v for k, v in spec["podSelector"]["matchLabels"].items())
    # The server's own policy admits the namespace's Pods, so the test is among its clients.
    server_policy = loaded.one("kubernetes:networking.k8s.io/v1:NetworkPolicy", "serve-chat-network-policy")
    assert {"podSelector": {}} in server_policy.inputs["spec"]["ingress"][0]["from"]


def test_every_manifest_is_valid(loaded: RunResult) -> None:
    for resource in loaded.resources:
        if resource.name.startswith("serving-load-chat-"):
            validate(resource.inputs)


def test_a_new_script_or_new_floors_replace_the_job() -> None:
    def hash_of(workload: dict) -> str:
        result = render(
            stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT], workloads=[workload])
        )
        return job(result)["spec"]["template"]["metadata"]["annotations"]["gke-gpu/script-sha256"]

    assert hash_of(LOAD) != hash_of({**LOAD, "floors": {"ttftP99Ms": 2500}})


def test_floors_from_the_stack_file_win_and_say_so() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4],
            serving=[CHAT],
            workloads=[{**LOAD, "floors": {"outputTokensPerSecond": 900, "tpotMeanMs": 15.5}}],
        )
    )
    command = job(result)["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--min-output-tok-s=900" in command and "--max-mean-tpot-ms=15.5" in command
    assert "--max-p99-ttft-ms=6000" in command  # the estimate for the one left out
    floors = result.outputs["serving"]["chat"]["loadTest"]["floors"]
    assert floors["outputTokensPerSecond"] == "900 (stack file)"
    assert floors["ttftP99Ms"] == "6000 (estimate for nvidia-l4)"


def test_no_load_test_unless_asked() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT]))
    assert not [r for r in result.resources if r.type == JOB]
    assert "loadTest" not in result.outputs["serving"]["chat"]


def test_every_gpu_that_can_serve_has_floors_and_mig_partitions_scale_them() -> None:
    from gke_gpu.core.catalog import load_catalog
    from gke_gpu.serving.pool_rules import CUDA13_UNSUPPORTED

    servable = set(load_catalog().accelerators) - CUDA13_UNSUPPORTED
    assert servable == set(FLOORS)
    whole, seventh = default_floors("nvidia-a100-80gb"), default_floors("nvidia-a100-80gb", "1g.10gb")
    assert seventh.min_output_tok_s == pytest.approx(whole.min_output_tok_s / 7, abs=0.1)
    assert seventh.max_mean_tpot_ms == pytest.approx(whole.max_mean_tpot_ms * 7, abs=0.1)


@pytest.mark.parametrize(
    ("workloads", "expected"),
    [
        (
            [{"name": "serving-load"}],
            "gke-gpu:workloads[0].service: required for serving-load: the gke-gpu:serving entry to load; "
            "services: chat",
        ),
        (
            [{**LOAD, "service": "chta"}],
            "gke-gpu:workloads[0].service: 'chta' is not a service of gke-gpu:serving; services: chat",
        ),
        ([{**LOAD, "pool": "l4"}], "gke-gpu:workloads[0].pool: not allowed for serving-load"),
        ([{**LOAD, "nodes": 2}], "gke-gpu:workloads[0].nodes: not allowed for serving-load"),
        ([LOAD, LOAD], "gke-gpu:workloads[1].service: 'chat' is already loaded by another serving-load"),
        (
            [{"name": "nvidia-smi", "service": "chat"}],
            "gke-gpu:workloads[0].service: only allowed for serving-load (name is nvidia-smi)",
        ),
        (
            [{"name": "nvidia-smi", "floors": {}}],
            "gke-gpu:workloads[0].floors: only allowed for serving-load",
        ),
        ([{**LOAD, "floors": {"ttftP99Ms": 0}}], "gke-gpu:workloads[0].floors.ttftP99Ms: 0 is not allowed"),
        ([{**LOAD, "floors": {"tokens": 5}}], "gke-gpu:workloads[0].floors.tokens"),
    ],
)
def test_bad_load_tests_are_refused_with_the_key(workloads: list, expected: str) -> None:
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [CHAT], "workloads": workloads}
    )
    assert expected in message, message


def test_a_broken_service_is_not_blamed_on_its_load_test() -> None:
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4],
            "serving": [{**CHAT, "gpusPerReplica": "x"}],
            "workloads": [LOAD],
        }
    )
    assert "gke-gpu:serving[0].gpusPerReplica" in message
    assert "workloads[0]" not in message, message


def test_a_load_test_without_gpu_pools_is_judged_by_its_service_alone() -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "workloads": [LOAD]})
    assert (
        "gke-gpu:workloads[0].service: 'chat' is not a service of gke-gpu:serving (the section is empty)"
        in message
    )
    assert "need a GPU pool" not in message and "needs a GPU pool" not in message


def test_the_component_checks_its_args() -> None:
    good = {"service": "chat", "min_output_tok_s": 1, "max_p99_ttft_ms": 1, "max_mean_tpot_ms": 1}
    with pytest.raises(InvalidArgsError) as refused:
        ServingLoadTest.check_args("t", {**good, "service": "Chat!", "levels": [4, 4], "max_p99_ttft_ms": -1})
    text = str(refused.value)
    assert "service: 'Chat!'" in text and "max_p99_ttft_ms" in text
    with pytest.raises(InvalidArgsError, match="levels: \\[4, 4\\] lists a level twice"):
        ServingLoadTest.check_args("t", {**good, "levels": [4, 4]})


def test_the_command_is_a_shell_safe_argv(loaded: RunResult) -> None:
    command = job(loaded)["spec"]["template"]["spec"]["containers"][0]["command"]
    assert shlex.split(shlex.join(command)) == command  # an argv, never a shell string


def test_a_service_named_like_the_load_test_keeps_its_own_network_policy() -> None:
    service = {**CHAT, "name": "serving-load"}
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4],
            serving=[service],
            workloads=[{"name": "serving-load", "service": "serving-load"}],
        )
    )
    policies = [
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"])
        for r in result.resources
        if r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    ]
    assert len(policies) == len(set(policies)), policies
    assert ("serve-serving-load", "serving-load-serving-load") in policies


def test_estimated_floors_on_a_bigger_replica_say_they_assume_a_small_model() -> None:
    pool = {**L4, "gpusPerNode": 2, "maxNodes": 2}
    service = {**CHAT, "gpusPerReplica": 2}
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[service], workloads=[LOAD])
    )
    note = result.outputs["serving"]["chat"]["loadTest"]["note"]
    assert "up to 8B parameters on one GPU" in note and "2 GPUs a replica" in note
    measured = {"outputTokensPerSecond": 900, "ttftP99Ms": 800, "tpotMeanMs": 25}
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[pool],
            serving=[service],
            workloads=[{**LOAD, "floors": measured}],
        )
    )
    assert "note" not in result.outputs["serving"]["chat"]["loadTest"]
