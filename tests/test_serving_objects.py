"""Serving's objects as a real cluster needs them (issue 24): one owner of the replica count, rollouts
without an outage where the pool has room, a disruption budget, the Cloud Storage FUSE sidecar
unthrottled and its file cache sized to the weights, and the bad input of the pool and bucket refused
with the rule it breaks."""

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from gke_gpu.gpu.pool import GpuPool
from gke_gpu.serving.sizing import GIB, weights_cache
from tests.conftest import L4_POOL, STANDARD_CLUSTER, config_error, render, service_args, stack_config
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

L4 = {**L4_POOL, "driverVersion": "LATEST"}
CHAT = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen2.5-1.5b-instruct"}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
H100 = {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "driverVersion": "LATEST"}


def serve(pool: dict, service: dict) -> RunResult:
    return render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[service]))


# Item 1: the replica count has one owner.


def test_under_an_autoscaler_the_deployment_sends_no_replica_count() -> None:
    result = serve({**L4, "maxNodes": 4}, {**CHAT, "replicas": {"min": 1, "max": 3}})
    deployment = result.one(DEPLOYMENT).inputs
    # Every apply of a count would put the HPA's replicas back to it (Kubernetes' HPA docs).
    assert "replicas" not in deployment["spec"]
    # Nothing to take back from the HPA, so nothing forced over other field managers.
    assert "pulumi.com/patchForce" not in deployment["metadata"]["annotations"]
    hpa = result.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler").inputs["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 3)


def test_fixed_replicas_still_set_the_count_and_take_it_back_from_an_autoscaler() -> None:
    result = serve(L4, {**CHAT, "replicas": {"min": 2, "max": 2}})
    deployment = result.one(DEPLOYMENT).inputs
    assert deployment["spec"]["replicas"] == 2
    # An HPA that scaled owns .spec.replicas (subresource scale): the apply that takes it back must force.
    assert deployment["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    assert result.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler") == []


def test_a_leader_worker_set_under_an_autoscaler_sends_no_replica_count() -> None:
    service = {**CHAT, "name": "big", "pool": "h100", "gpusPerReplica": 16, "replicas": {"min": 1, "max": 2}}
    spec = serve({**H100, "maxNodes": 4}, service).one(LWS).inputs
    assert "replicas" not in spec["spec"]
    assert "pulumi.com/patchForce" not in spec["metadata"]["annotations"]
    fixed = serve({**H100, "maxNodes": 4}, {**service, "replicas": {"min": 2, "max": 2}}).one(LWS).inputs
    assert fixed["spec"]["replicas"] == 2
    assert fixed["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"


# Item 6: rollouts and disruptions.


def test_a_pool_with_room_surges_a_replica_so_a_rollout_keeps_serving() -> None:
    # maxNodes 2 of one L4 each, one replica: room for a second during the rollout.
    result = serve(L4, CHAT)
    strategy = result.one(DEPLOYMENT).inputs["spec"]["strategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert result.outputs["serving"]["chat"]["rollout"].startswith("a surge replica (1 GPU(s)) starts")
    assert not any("a rollout of chat" in w for w in result.warnings)


def test_a_full_pool_says_a_rollout_takes_its_single_replica_down() -> None:
    result = serve({**L4, "maxNodes": 1}, CHAT)
    strategy = result.one(DEPLOYMENT).inputs["spec"]["strategy"]["rollingUpdate"]
    assert strategy == {"maxSurge": 0, "maxUnavailable": 1}
    (note,) = [w for w in result.warnings if "a rollout of chat" in w]
    assert note.startswith("note: gke-gpu:serving[0]: a rollout of chat takes the service down")
    assert "pool l4's maxNodes 1 leaves no room for a surge replica" in note
    assert "takes the service down" in result.outputs["serving"]["chat"]["rollout"]


def test_surge_room_is_shared_between_the_services_of_a_pool() -> None:
    pool = GpuPool.model_validate({**L4, "gpusPerNode": 1, "maxNodes": 3, "machineType": "g2-standard-8"})
    from gke_gpu.serving.sizing import surge_services

    # 3 GPUs, 2 used at most: one surge, for the first service that fits.
    assert surge_services(pool, [("a", 1, 1), ("b", 1, 1)]) == {"a"}
    assert surge_services(pool, [("a", 1, 2)]) == set()


def test_two_replicas_get_a_disruption_budget_of_one() -> None:
    result = serve({**L4, "maxNodes": 4}, {**CHAT, "replicas": {"min": 2, "max": 3}})
    budget = result.one(PDB).inputs
    validate(budget)
    assert budget["spec"]["maxUnavailable"] == 1 and "minAvailable" not in budget["spec"]
    # A replica that is not Ready (loading, crashing) never holds a drain (Kubernetes' advice).
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert (
        budget["spec"]["selector"]["matchLabels"]
        == result.one(DEPLOYMENT).inputs["spec"]["selector"]["matchLabels"]
    )
    assert budget["metadata"]["namespace"] == "serve-chat"


def test_a_drain_never_takes_the_last_replica_of_a_service_that_may_run_one() -> None:
    """A service whose autoscaler may leave one replica keeps it while it is the only one that serves
    (minAvailable 1): a drain takes it once a second replica is Ready, not before."""
    for replicas in ({"min": 1, "max": 2}, {"min": 1, "max": 1}):
        budget = serve(L4, {**CHAT, "replicas": replicas}).one(PDB).inputs
        validate(budget)
        assert budget["spec"]["minAvailable"] == 1 and "maxUnavailable" not in budget["spec"]
        assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_the_budget_keeps_a_whole_group_of_a_replica_over_nodes() -> None:
    from gke_gpu.serving.rollout import disruption_budget
    from gke_gpu.serving.service_spec import InferenceServiceSpec

    base = {"model": "gs://b/m", "node_selector": {"k": "v"}, "tolerations": [], "project": "p-12345"}
    group = InferenceServiceSpec.model_validate(
        {**base, "name": "big", "cluster_name": "c", "gpus_per_replica": 16, "gpus_per_node": 8}, by_name=True
    )
    assert disruption_budget(group) == {"unhealthyPodEvictionPolicy": "AlwaysAllow", "minAvailable": 2}
    two = group.model_copy(update={"replicas": 2})
    assert disruption_budget(two) == {"unhealthyPodEvictionPolicy": "AlwaysAllow", "maxUnavailable": 1}


def test_a_single_replica_on_spot_only_capacity_is_warned_with_the_fix() -> None:
    result = serve({**L4, "spot": True}, CHAT)
    (warning,) = [w for w in result.warnings if "Spot VMs" in w]
    assert warning.startswith("warning: gke-gpu:serving[0].replicas.min: chat runs one replica on pool l4")
    assert "run replicas.min 2" in warning and "capacityLadder" in warning
    two = serve({**L4, "spot": True, "maxNodes": 3}, {**CHAT, "replicas": {"min": 2, "max": 2}})
    assert not any("Spot VMs" in w for w in two.warnings)


# Item 3: the weights at full speed.


def test_the_sidecar_is_unthrottled_as_googles_vllm_manifests_do() -> None:
    annotations = serve(L4, CHAT).one(DEPLOYMENT).inputs["spec"]["template"]["metadata"]["annotations"]
    assert {k: annotations[k] for k in annotations if k.endswith("-limit")} == {
        "gke-gcsfuse/cpu-limit": "0",
        "gke-gcsfuse/memory-limit": "0",
        "gke-gcsfuse/ephemeral-storage-limit": "0",
    }


L4_NODE = GpuPool.model_validate({**L4, "gpusPerNode": 1, "machineType": "g2-standard-8"})
BIG_L4_NODE = GpuPool.model_validate({**L4, "gpusPerNode": 1, "machineType": "g2-standard-32"})


def test_small_weights_cache_in_memory_with_room_to_spare() -> None:
    # g2-standard-32 (128 GB): 15% is 19 GiB beside the container; 3 GiB of weights need a 5 GiB cache.
    cache = weights_cache(BIG_L4_NODE, 1, 3 * GIB)
    assert (cache.size_gib, cache.medium, cache.problem) == (5, "memory", "")


def test_weights_that_do_not_fit_memory_twice_go_on_the_boot_disk_sized_to_them() -> None:
    cache = weights_cache(L4_NODE, 1, 15 * GIB)  # an 8B model in 16 bits
    assert (cache.size_gib, cache.medium, cache.where.split(" (")[0]) == (18, "disk", "the node's boot disk")


def test_weights_larger_than_the_cache_a_pod_can_hold_are_refused_with_both_sizes() -> None:
    cache = weights_cache(L4_NODE, 1, 140 * GIB)  # a 70B model in 16 bits
    assert cache.problem.startswith(
        "the model's weights (140.0 GiB, a 155 GiB file cache with its headroom) are larger than the 36 GiB "
        "file cache a Pod of pool l4 can hold on the node's boot disk"
    )
    assert "localSsdCount" in cache.problem and "hyperdiskMl" in cache.problem


def test_the_stack_refuses_weights_larger_than_the_cache() -> None:
    # 70 Gi parameters in 16 bits: 140 GiB of weights.
    large = {**CHAT, "modelInfo": {"parameters": 70 * GIB, "dtype": "bfloat16"}}
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [large]})
    assert "gke-gpu:serving[0].model: the model's weights (140.0 GiB, a 155 GiB file cache" in message


def test_local_ssd_holds_the_cache_first() -> None:
    pool = GpuPool.model_validate(
        {**L4, "gpusPerNode": 1, "machineType": "g2-standard-32", "localSsdCount": 1}
    )
    cache = weights_cache(pool, 1, 3 * GIB)
    assert cache.medium == "disk" and cache.where.startswith("the node's Local SSD")


# Bad input of the pool and the bucket.


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            "gs://Models_Bucket/m",
            "'gs://Models_Bucket/m': bucket 'Models_Bucket' has 'B', 'M': a bucket name has only lowercase",
        ),
        ("gs://ab/m", "bucket 'ab' is 2 characters: a bucket name has 3 to 63"),
        ("gs://-models/m", "bucket '-models' must start and end with a letter or a digit"),
        ("gs://192.168.1.10/m", "is an IP address in dotted-decimal notation"),
        ("gs://goog-models/m", "starts with 'goog', which Cloud Storage reserves"),
        ("gs://my-google-models/m", "contains 'google', which Cloud Storage reserves"),
        ("gs://models..bucket/m", "has two dots in a row"),
    ],
)
def test_a_bucket_name_names_the_rule_it_breaks(model: str, expected: str) -> None:
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [{**CHAT, "model": model}]}
    )
    assert f"gke-gpu:serving[0].model: {expected}" in message or expected in message, message
    assert "neither gs://" not in message


def test_scale_on_gpu_on_a_mig_pool_is_refused() -> None:
    mig = {**H100, "maxNodes": 2, "migPartitionSize": "3g.40gb"}
    service = {**CHAT, "pool": "h100", "replicas": {"min": 1, "max": 2}, "scaleOn": "gpu"}
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [mig], "serving": [service]})
    assert (
        "gke-gpu:serving[0].scaleOn: gpu is not allowed on pool h100, which partitions each GPU (MIG)"
        in message
    )


def test_a_replica_larger_than_the_whole_pool_is_blamed_on_gpus_per_replica() -> None:
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [{**CHAT, "gpusPerReplica": 4}]}
    )
    assert (
        "gke-gpu:serving[0].gpusPerReplica: 4 is more than pool l4 holds at its largest "
        "(2 GPUs: maxNodes 2 x 1)" in message
    )
    assert "serving[0].replicas:" not in message


# Item 2: images that stream.


def test_the_stack_mirrors_docker_hub_in_its_region_and_the_nodes_read_that_repository_alone() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT]), preview=False)
    repository = result.one("gcp:artifactregistry/repository:Repository").inputs
    assert (repository["location"], repository["format"], repository["mode"]) == (
        "us-central1",
        "DOCKER",
        "REMOTE_REPOSITORY",
    )
    assert repository["remoteRepositoryConfig"]["dockerRepository"] == {"publicRepository": "DOCKER_HUB"}
    (reader,) = result.of_type("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    assert reader.inputs["role"] == "roles/artifactregistry.reader"
    assert reader.inputs["location"] == "us-central1"
    assert reader.inputs["repository"] == repository["repositoryId"] == "docker-hub"
    nodes = result.one("gcp:serviceaccount/account:Account", "gke-nodes").inputs["accountId"]
    assert reader.inputs["member"].startswith(f"serviceAccount:{nodes}@")
    (container,) = result.one(DEPLOYMENT).inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("us-central1-docker.pkg.dev/test-project/docker-hub/vllm/")


def test_without_a_mirror_the_render_says_the_image_is_pulled_whole() -> None:
    from gke_gpu.serving.image_source import describe_image

    text = describe_image("vllm/vllm-openai:v0.33.0", "", None)
    assert text.startswith("vllm/vllm-openai:v0.33.0: pulled whole from Docker Hub")
    assert "streamed" not in text.split("(")[0]


def test_a_stack_without_services_declares_no_mirror() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4]))
    assert result.of_type("gcp:artifactregistry/repository:Repository") == []


# Item 9: a team's quota on a pool the servers fill.


def test_a_teams_quota_on_a_serving_pool_is_warned_about() -> None:
    batch = {"kueue": True, "teams": [{"name": "research", "pools": {"l4": {"gpus": 1}}}]}
    raw = {"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [CHAT], "batch": batch}
    from gke_gpu.stack.config import parse_settings

    _, notes = parse_settings(raw, project="test-project", region="us-central1", stack="test")
    (warning,) = [n for n in notes if "batch.teams" in n]
    assert "team research has 1 GPUs of quota on pool l4, which model servers also use" in warning


def test_the_components_check_the_image_they_are_given() -> None:
    from gke_gpu.core.validation import InvalidArgsError
    from gke_gpu.serving.inference_service import InferenceService

    args = service_args()
    with pytest.raises(
        InvalidArgsError, match=r"image: 'Docker\.io/VLLM' is not allowed: expected a container image"
    ):
        InferenceService.check_args("chat", {**args, "image": "Docker.io/VLLM"})
    InferenceService.check_args(
        "chat", {**args, "image": "us-central1-docker.pkg.dev/p/docker-hub/vllm/x:v1"}
    )


_BUCKET_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-_.AZ/ "


@given(st.text(alphabet=_BUCKET_CHARS, max_size=70))
@example("a.b")
@example("x" * 63)
@example("models_bucket-1.example")
@settings(max_examples=300, deadline=None)
def test_a_bucket_name_no_rule_refuses_is_read_as_a_bucket(name: str) -> None:
    """The naming rules and the model's pattern agree where it matters: a name no rule refuses (up to
    63 characters) is a bucket the gs:// form reads, never "neither gs:// nor Hugging Face"."""
    from gke_gpu.serving.bucket_name import bucket_name_problem
    from gke_gpu.serving.model import GCS_MODEL

    assume("/" not in name and len(name) <= 63)
    if bucket_name_problem(name) is None:
        assert GCS_MODEL.fullmatch(f"gs://{name}/m") is not None, name


def _gib(quantity: str) -> float:
    units = {"Gi": 1.0, "Mi": 1 / 1024, "Ki": 1 / 1024**2}
    return next(float(quantity[: -len(u)]) * f for u, f in units.items() if quantity.endswith(u))


def test_the_serve_examples_pod_asks_no_more_ephemeral_storage_than_its_node_gives_pods() -> None:
    """The Pod's ephemeral-storage requests (its containers' and the FUSE sidecar's cache, which GKE's
    webhook adds from the annotation) fit what GKE lets Pods request of the node's boot disk. Before,
    the serve example asked for 93 + 51 GiB of a 200 GB disk that leaves Pods about 96: it never
    scheduled, and the cluster autoscaler could not help (every node is the same size)."""
    from gke_gpu.serving.sizing import GB_PER_GIB, allocatable_ephemeral_gib
    from tests.conftest import stack_render

    result = stack_render("serve")
    spec = result.one(DEPLOYMENT).inputs["spec"]["template"]
    containers = spec["spec"]["containers"] + spec["spec"].get("initContainers", [])
    asked = sum(
        _gib(c.get("resources", {}).get("requests", {}).get("ephemeral-storage", "0Gi")) for c in containers
    )
    asked += _gib(spec["metadata"]["annotations"]["gke-gcsfuse/ephemeral-storage-request"])
    disk_gb = 200  # Pulumi.serve.yaml's l4 pool: g2-standard-8, one GPU, the whole node for one replica
    assert asked <= allocatable_ephemeral_gib(disk_gb / GB_PER_GIB), asked


def test_replicas_sharing_a_node_ask_for_its_ephemeral_storage_together_not_each() -> None:
    """Eight one-GPU replicas on an 8-GPU A3 node: their ephemeral-storage requests (containers and the
    FUSE cache) fit the node's allocatable together. Before, each container asked for a quarter of the
    whole node's Local SSD (1,397 GiB) and left its cache no room: three replicas a node at most, five of
    its eight GPUs stranded."""
    from gke_gpu.gpu.pool import LOCAL_SSD_GIB
    from gke_gpu.serving.sizing import allocatable_ephemeral_gib
    from tests.conftest import STANDARD_CLUSTER, render, stack_config

    h100 = {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "maxNodes": 1}
    h100["driverVersion"] = "LATEST"
    service: dict[str, object] = {"name": "chat", "pool": "h100", "model": "gs://models-bucket/m"}
    service["replicas"] = {"min": 8, "max": 8}
    service["modelInfo"] = {"parameters": 8_000_000_000, "dtype": "bfloat16"}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[h100], serving=[service]))
    spec = result.one(DEPLOYMENT).inputs["spec"]["template"]
    containers = spec["spec"]["containers"] + spec["spec"].get("initContainers", [])
    asked = sum(
        _gib(c.get("resources", {}).get("requests", {}).get("ephemeral-storage", "0Gi")) for c in containers
    )
    asked += _gib(spec["metadata"]["annotations"].get("gke-gcsfuse/ephemeral-storage-request", "0Gi"))
    assert 8 * asked <= allocatable_ephemeral_gib(16 * LOCAL_SSD_GIB), asked


def test_a_mig_pool_gets_its_own_note_not_a_model_info_one() -> None:
    mig = {**H100, "maxNodes": 2, "migPartitionSize": "3g.40gb"}
    service = {"name": "chat", "pool": "h100", "model": "Qwen/Qwen2.5-1.5B-Instruct"}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[mig], serving=[service]))
    notes = [w for w in result.warnings if "gke-gpu:serving[0]" in w]
    assert (
        "note: gke-gpu:serving[0].model: not checked against the GPUs' memory: the replicas run on MIG "
        "partitions (3g.40gb), slices of a GPU whose memory this check does not count, whatever the model's "
        "figures; only the server's start will show whether the model fits"
    ) in notes
    # No model_info figure would let that check run: no note says so.
    assert not [n for n in notes if "GPUs' memory" in n and "modelInfo" in n], notes
