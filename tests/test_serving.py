"""Serving (issue 18, first part): `gke-gpu:serving` and InferenceService, a vLLM model server on a GPU
pool with its weights from Cloud Storage or Hugging Face."""

import pytest

from gke_gpu.core import images
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.serving.weights_reader import service_account_id
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    config_error,
    render,
    service_args,
    stack_config,
)
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

L4 = {**L4_POOL, "driverVersion": "LATEST"}
CHAT = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen2.5-1.5b-instruct"}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


@pytest.fixture(scope="module")
def served() -> RunResult:
    return render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[{**CHAT, "maxModelLen": 8192}])
    )


def pod(result: RunResult, name: str = "serve-chat-deployment") -> dict:
    return result.one(DEPLOYMENT, name).inputs["spec"]["template"]


def test_vllm_runs_the_model_on_the_pools_gpu(served: RunResult) -> None:
    template = pod(served)
    spec = template["spec"]
    (container,) = spec["containers"]
    # Through the stack's Docker Hub mirror in its region, where image streaming applies.
    assert images.VLLM == "vllm/vllm-openai:v0.33.0"
    assert container["image"] == "us-central1-docker.pkg.dev/test-project/docker-hub/vllm/vllm-openai:v0.33.0"
    assert container["args"] == [
        "/models",
        "--served-model-name=chat",
        "--tensor-parallel-size=1",
        "--host=0.0.0.0",
        "--port=8000",
        "--max-model-len=8192",
    ]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["limits"] == container["resources"]["requests"]
    # g2-standard-8 (8 vCPUs, 32 GB, 1 GPU): half the CPU, 55% of the memory (15% more: the file cache).
    assert (
        container["resources"]["limits"]["cpu"] == "4"
        and container["resources"]["limits"]["memory"] == "17Gi"
    )
    assert spec["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "cloud.google.com/gke-nodepool": "l4",
    }
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": 8000}
    assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] == 1800


def test_the_server_is_hardened(served: RunResult) -> None:
    spec = pod(served)["spec"]
    # The image's own user (the one UID with a passwd entry: getpass.getuser() needs it).
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 2000
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    # The whole home is scratch (vLLM's, Triton's, CUDA's caches), within the ephemeral-storage limit.
    assert mounts == {"/home/vllm", "/tmp", "/dev/shm", "/models"}
    home = next(v for v in spec["volumes"] if v["name"] == "home")
    assert home["emptyDir"]["sizeLimit"] == "50Gi"  # a quarter of the L4 pool's 200 GB boot disk
    assert container["resources"]["limits"]["ephemeral-storage"] == "51Gi"
    assert all(
        container[p]["timeoutSeconds"] == 5 for p in ("startupProbe", "readinessProbe", "livenessProbe")
    )
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    strategy = served.one(DEPLOYMENT).inputs["spec"]["strategy"]
    # maxNodes 2 leaves one L4 beside the replica: a surge replica first, no outage.
    assert strategy["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_bucket_weights_are_mounted_read_only_as_the_services_own_account(served: RunResult) -> None:
    template = pod(served)
    assert template["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    weights = next(v for v in template["spec"]["volumes"] if v["name"] == "weights")
    assert weights["csi"]["driver"] == "gcsfuse.csi.storage.gke.io" and weights["csi"]["readOnly"] is True
    attributes = weights["csi"]["volumeAttributes"]
    assert attributes["bucketName"] == "models-bucket"
    assert "only-dir=qwen2.5-1.5b-instruct" in attributes["mountOptions"].split(",")
    assert "uid=2000" in attributes["mountOptions"].split(",")
    (mount,) = [m for m in template["spec"]["containers"][0]["volumeMounts"] if m["name"] == "weights"]
    assert mount["readOnly"] is True
    viewer = served.one("gcp:storage/bucketIAMMember:BucketIAMMember").inputs
    assert viewer["bucket"] == "models-bucket" and viewer["role"] == "roles/storage.objectViewer"
    binding = served.one("gcp:serviceaccount/iAMMember:IAMMember").inputs
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert binding["member"] == "serviceAccount:test-project.svc.id.goog[serve-chat/vllm]"
    account = served.one("gcp:serviceaccount/account:Account", "serve-chat-weights-reader").inputs
    assert account["accountId"] == service_account_id("gpu-test", "chat")
    ksa = served.one("kubernetes:core/v1:ServiceAccount").inputs
    assert set(ksa["metadata"]["annotations"]) == {"iam.gke.io/gcp-service-account"}


def test_the_cluster_gets_the_cloud_storage_fuse_driver(served: RunResult) -> None:
    cluster = served.one("gcp:container/cluster:Cluster").inputs
    assert cluster["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": True}}
    plain = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4]))
    assert "addonsConfig" not in plain.one("gcp:container/cluster:Cluster").inputs


def test_only_its_namespace_clients_and_the_scraper_reach_the_api(served: RunResult) -> None:
    policy = served.one("kubernetes:networking.k8s.io/v1:NetworkPolicy", "serve-chat-network-policy").inputs[
        "spec"
    ]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": 8000, "protocol": "TCP"}]
    assert {"podSelector": {}} in rule["from"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gmp-system"}}} in rule[
        "from"
    ]
    monitoring = served.one("kubernetes:monitoring.googleapis.com/v1:PodMonitoring").inputs["spec"]
    assert monitoring["endpoints"] == [{"port": 8000, "path": "/metrics", "interval": "15s"}]


def test_every_manifest_is_valid(served: RunResult) -> None:
    manifests = [
        r.inputs for r in served.resources if r.type.startswith("kubernetes:") and "apiVersion" in r.inputs
    ]
    kinds = sorted(
        m["kind"]
        for m in manifests
        if m["metadata"].get("namespace") == "serve-chat" or m["kind"] == "Namespace"
    )
    assert {"Deployment", "Service", "NetworkPolicy", "ServiceAccount", "PodMonitoring"} <= set(kinds)
    for manifest in manifests:
        validate(manifest)


def test_the_output_says_where_it_answers_and_how_to_try_it(served: RunResult) -> None:
    chat = served.outputs["serving"]["chat"]
    assert chat["url"] == "http://chat.serve-chat.svc:8000"
    assert chat["weights"].startswith("Cloud Storage FUSE: gs://models-bucket/qwen2.5-1.5b-instruct")
    assert chat["commands"]["portForward"] == "kubectl port-forward -n serve-chat service/chat 8000:8000"


def test_a_hugging_face_model_uses_its_token_secret_and_no_bucket() -> None:
    service = {"name": "chat", "pool": "l4", "model": "Qwen/Qwen2.5-1.5B-Instruct", "hfTokenSecret": "hf"}
    result = render(
        stack_config(
            cluster=AUTOPILOT_CLUSTER,
            gpuPools=[{"name": "l4", "accelerator": "nvidia-l4", "driverVersion": "LATEST"}],
            serving=[service],
        )
    )
    (container,) = pod(result)["spec"]["containers"]
    assert container["args"][0] == "Qwen/Qwen2.5-1.5B-Instruct"
    token = next(e for e in container["env"] if e["name"] == "HF_TOKEN")
    assert token["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    assert result.of_type("gcp:storage/bucketIAMMember:BucketIAMMember") == []
    assert "addonsConfig" not in result.one("gcp:container/cluster:Cluster").inputs  # Autopilot has it


@pytest.mark.parametrize(
    ("service", "pools", "expected"),
    [
        (
            {**CHAT, "pool": "h100"},
            [L4],
            "gke-gpu:serving[0].pool: 'h100' is not a GPU pool of this stack; pools: l4",
        ),
        (
            {**CHAT, "gpusPerReplica": 3},
            [{**L4, "gpusPerNode": 2}],
            "gke-gpu:serving[0].gpusPerReplica: 3 is not a whole multiple of pool l4's 2 GPUs per node",
        ),
        (
            {**CHAT, "replicas": {"min": 3, "max": 2}},
            [L4],
            "gke-gpu:serving[0].replicas.min: 3 is greater than replicas.max 2",
        ),
        (
            {**CHAT, "replicas": {"min": 0, "max": 2}},
            [L4],
            "gke-gpu:serving[0].replicas.min: 0 is not offered: at zero replicas no vLLM metric exists",
        ),
        (
            {**CHAT, "scaleOn": "queue"},
            [L4],
            "gke-gpu:serving[0].scaleOn: only allowed when replicas.min is below",
        ),
        (
            {**CHAT, "model": "s3://bucket/model"},
            [L4],
            "gke-gpu:serving[0].model: 's3://bucket/model' is neither gs://<bucket>/<path> nor a "
            "Hugging Face id",
        ),
        (
            {**CHAT, "model": "meta-llama/Llama-3.2-1B-Instruct"},
            [L4],
            "gke-gpu:serving[0].hfTokenSecret: required: meta-llama/Llama-3.2-1B-Instruct is gated on "
            "Hugging Face",
        ),
        (
            {**CHAT, "hfTokenSecret": "hf"},
            [L4],
            "gke-gpu:serving[0].hfTokenSecret: only allowed with a Hugging Face model",
        ),
        (
            {**CHAT, "model": "gs://models-bucket"},
            [L4],
            "gke-gpu:serving[0].model: 'gs://models-bucket' needs the path of the model's files",
        ),
        (
            CHAT,
            [{**L4, "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2}}],
            "gke-gpu:serving[0].pool: 'l4' shares its GPUs (TIME_SHARING): vLLM takes 92% of a GPU's memory",
        ),
        (
            CHAT,
            [{**L4, "accelerator": "nvidia-tesla-v100", "gpusPerNode": 1}],
            "has nvidia-tesla-v100 GPUs (Volta or older); the pinned vLLM image is a CUDA 13 build",
        ),
        (
            CHAT,
            [{**L4, "queuedProvisioning": True}],
            "gke-gpu:serving[0].pool: 'l4' takes nodes only through queued provisioning",
        ),
        (
            {**CHAT, "replicas": {"min": 3, "max": 3}},
            [L4],
            "gke-gpu:serving[0].replicas: the services on pool l4 need 3 GPUs (chat 3 x 1), more than its 2 "
            "(maxNodes 2 x 1)",
        ),
        (
            {**CHAT, "model": "gs://models-bucket/a,implicit-dirs,uid=0/m"},
            [L4],
            "is neither gs://<bucket>/<path> nor a Hugging Face id",
        ),
        (
            {**CHAT, "model": "gs://models-bucket/./m"},
            [L4],
            "without `.` or `..` segments",
        ),
        (
            {**CHAT, "model": "Qwen/Qwen2.5", "hfTokenSecret": "Bad_Name!"},
            [L4],
            "gke-gpu:serving[0].hfTokenSecret: 'Bad_Name!' is not allowed",
        ),
        (
            CHAT,
            [L4_POOL],
            "gke-gpu:serving[0].pool: 'l4' runs driverVersion DEFAULT; the pinned vLLM image is a CUDA 13 "
            "build",
        ),
        ({**CHAT, "server": "tgi"}, [L4], "gke-gpu:serving[0].server: 'tgi' is not allowed; allowed: 'vllm'"),
    ],
)
def test_bad_services_are_refused_with_the_key(service: dict, pools: list, expected: str) -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": pools, "serving": [service]})
    assert expected in message, message


def test_two_services_may_not_share_a_name() -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": [CHAT, CHAT]})
    assert "gke-gpu:serving[1].name: 'chat' is also serving[0]'s name" in message


ARGS = service_args()


def test_the_component_checks_its_args() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args(
            "chat", {**ARGS, "model": "meta-llama/Llama-3.1-8B-Instruct", "shm_gib": 64, "memory_gib": 32}
        )
    text = str(refused.value)
    assert "hf_token_secret: required: meta-llama/Llama-3.1-8B-Instruct is gated on Hugging Face" in text
    assert "shm_gib: 64 is not less than memory_gib 32" in text


def test_service_account_ids_fit_and_differ_per_cluster() -> None:
    ids = {
        service_account_id(cluster, "a-very-long-service-name-of-forty-chars") for cluster in ("one", "two")
    }
    assert len(ids) == 2 and all(6 <= len(i) <= 30 and i[0].isalpha() for i in ids)


def test_the_cost_estimate_prices_a_replica_hour_and_the_replicas() -> None:
    from tools import cost, plan

    service = {**CHAT, "replicas": {"min": 2, "max": 2}}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[service]))
    estimate = cost.estimate(plan.to_document(result))
    (pool,) = estimate["pools"]
    (chat,) = estimate["services"]
    node = pool["nodeHourly"]["onDemand"]  # g2-standard-8 with its L4, the pool's own pricing
    assert chat["replicaHourly"] == round(node, 4) or abs(chat["replicaHourly"] - node) < 0.01
    assert abs(chat["hourlyAtMax"] - 2 * node) < 0.01
    assert abs(chat["monthlyAtMax"] - 2 * node * 730) < 1
    assert any(line.startswith("  - model server chat on l4 (on-demand):") for line in estimate["table"])


def test_a_replica_range_scales_on_the_queue_through_the_custom_metrics_adapter() -> None:
    pool = {**L4, "maxNodes": 4}
    service = {**CHAT, "replicas": {"min": 1, "max": 3}, "scaleOn": "queue"}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[service]))
    hpa = result.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler").inputs
    validate(hpa)
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 3)
    (metric,) = spec["metrics"]
    assert metric["pods"]["metric"]["name"] == "prometheus.googleapis.com|vllm:num_requests_waiting|gauge"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "5"}
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert "replicas" not in result.one(DEPLOYMENT).inputs["spec"]  # the autoscaler's alone
    # The adapter, once per cluster, from its pinned upstream manifest, reading as an account of its own.
    manifest = result.one("kubernetes:yaml/v2:ConfigFile").inputs
    assert manifest["file"].startswith(
        "https://raw.githubusercontent.com/GoogleCloudPlatform/k8s-stackdriver/af49d863755c0535f598cfde9288ae9a75251d38/"
    )
    viewer = result.one("gcp:projects/iAMMember:IAMMember", "custom-metrics-monitoring-viewer").inputs
    assert viewer["role"] == "roles/monitoring.viewer"
    identity = result.one("gcp:serviceaccount/iAMMember:IAMMember", "custom-metrics-workload-identity").inputs
    assert (
        identity["member"]
        == "serviceAccount:test-project.svc.id.goog[custom-metrics/custom-metrics-stackdriver-adapter]"
    )
    deployment = result.one(DEPLOYMENT).inputs["metadata"]["annotations"]
    assert "pulumi.com/patchForce" not in deployment  # no count sent: nothing to take back
    patch = result.one("kubernetes:core/v1:ServiceAccountPatch").inputs
    assert patch["metadata"]["name"] == "custom-metrics-stackdriver-adapter"
    assert set(patch["metadata"]["annotations"]) == {"iam.gke.io/gcp-service-account"}
    chat = result.outputs["serving"]["chat"]
    assert chat["replicas"] == {"min": 1, "max": 3} and chat["scaling"].startswith(
        "vllm:num_requests_waiting"
    )


def test_fixed_replicas_need_no_autoscaler_or_adapter(served: RunResult) -> None:
    assert served.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler") == []
    assert served.of_type("gke-gpu:index:CustomMetricsAdapter") == []


def test_the_component_checks_its_replica_range() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("chat", {**ARGS, "replicas": 3, "max_replicas": 2})
    assert "max_replicas: 2 is less than replicas 3" in str(refused.value)
    with pytest.raises(InvalidArgsError, match="queue_target: only allowed with max_replicas"):
        InferenceService.check_args("chat", {**ARGS, "queue_target": 3})


def test_an_autoscaled_service_is_priced_at_its_max() -> None:
    from tools import cost, plan

    service = {**CHAT, "replicas": {"min": 1, "max": 2}}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[service]))
    (chat,) = cost.estimate(plan.to_document(result))["services"]
    assert chat["replicas"] == 2 and abs(chat["hourlyAtMax"] - 2 * chat["replicaHourly"]) < 0.01


def test_a_bad_default_name_is_named_as_the_default() -> None:
    with pytest.raises(InvalidArgsError, match=r"name \(default: the resource name\): 'Chat_1'"):
        InferenceService.check_args("Chat_1", ARGS)


def _weights(result: RunResult) -> tuple[dict, dict, dict]:
    template = pod(result)
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    annotations = template["metadata"]["annotations"]
    return volumes["weights"]["csi"], volumes.get("gke-gcsfuse-cache", {}), annotations


def test_a_file_cache_sized_for_the_weights_fetches_them_in_parallel(served: RunResult) -> None:
    csi, cache, annotations = _weights(served)
    options = csi["volumeAttributes"]["mountOptions"].split(",")
    # The cache evicts 1 GiB before its volume is full (a full volume fails the read instead).
    assert {
        "file-cache:max-size-mb:35840",
        "file-cache:cache-file-for-range-read:true",
        "file-cache:enable-parallel-downloads:true",
    } <= set(options)
    # g2-standard-8 without Local SSD, the model's size unknown: what GKE lets Pods request of its 200 GB
    # (186 GiB) boot disk (less 71 GiB reserved and 18.6 GiB of eviction threshold: 96 GiB), 10% under
    # that, less the container's own 50 GiB: 36 GiB, so the Pod fits the node (it asked for 93 + 50).
    assert cache["emptyDir"] == {"sizeLimit": "36Gi"}
    # The sidecar unlimited (accelerated-platforms' vLLM manifests), the cache's disk requested.
    assert annotations == {
        "gke-gcsfuse/volumes": "true",
        "gke-gcsfuse/cpu-limit": "0",
        "gke-gcsfuse/memory-limit": "0",
        "gke-gcsfuse/ephemeral-storage-limit": "0",
        "gke-gcsfuse/ephemeral-storage-request": "36Gi",
    }
    weights = served.outputs["serving"]["chat"]["weights"]
    assert "file cache 36 GiB on the node's boot disk (200 GB, the pool has no Local SSD)" in weights
    assert "the model's size is not known here: as large as the disk holds" in weights


def test_a_pool_with_local_ssd_keeps_the_file_cache_there() -> None:
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[{**L4, "localSsdCount": 1}], serving=[CHAT])
    )
    _, cache, annotations = _weights(result)
    # The one 375 GB (349 GiB) Local SSD the pool puts ephemeral storage on: 214 GiB allocatable (less
    # 100 GiB reserved and 34.9 GiB of eviction threshold), 10% under that, less the container's 87 GiB.
    assert cache["emptyDir"] == {"sizeLimit": "105Gi"}
    assert annotations["gke-gcsfuse/ephemeral-storage-request"] == "105Gi"
    assert "gke-gcsfuse/memory-request" not in annotations
    assert (
        "file cache 105 GiB on the node's Local SSD (1 x 375 GB)"
        in result.outputs["serving"]["chat"]["weights"]
    )


def test_no_file_cache_where_the_nodes_size_is_unknown_or_the_model_is_not_in_a_bucket() -> None:
    from gke_gpu.gpu.pool import GpuPool
    from gke_gpu.serving.sizing import weights_cache

    profile = GpuPool.model_validate({"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 1})
    assert weights_cache(profile, 1, None).size_gib == 0
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args(
            "chat",
            {**ARGS, "model": "Qwen/Qwen2.5", "hf_token_secret": "hf", "weights_cache_gib": 4},
        )
    assert "weights_cache_gib: 4 is only allowed with a gs:// model" in str(refused.value)
    with pytest.raises(InvalidArgsError, match="weights_cache_medium: only allowed with weights_cache_gib"):
        InferenceService.check_args("chat", {**ARGS, "weights_cache_medium": "disk"})


def test_the_output_says_how_the_image_reaches_a_new_node(served: RunResult) -> None:
    image = served.outputs["serving"]["chat"]["image"]
    assert image.startswith(
        "us-central1-docker.pkg.dev/test-project/docker-hub/vllm/vllm-openai:v0.33.0: from Artifact Registry"
    )
    assert "UNVERIFIED" in image  # streaming from a remote repository: not on GKE's own page
    disk = "projects/example/global/images/vllm-0-33"
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER, gpuPools=[{**L4, "imageCache": {"diskImage": disk}}], serving=[CHAT]
        )
    )
    assert (
        f"preloaded from the pool's secondary boot disk {disk}" in result.outputs["serving"]["chat"]["image"]
    )


def test_scale_on_gpu_reads_the_services_gpu_duty_cycle_as_an_external_metric() -> None:
    pool = {**L4, "gpusPerNode": 2, "maxNodes": 4}
    service = {**CHAT, "gpusPerReplica": 2, "replicas": {"min": 1, "max": 4}, "scaleOn": "gpu"}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[service]))
    hpa = result.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler").inputs
    validate(hpa)
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    # GKE's per-container GPU metric, lowercase as the adapter needs, over this service's vLLM
    # containers only.
    assert metric["external"]["metric"] == {
        "name": "kubernetes.io|container|accelerator|duty_cycle",
        "selector": {
            "matchLabels": {
                # The adapter filters External metrics by no cluster of its own.
                "resource.labels.cluster_name": "gpu-test",
                "resource.labels.namespace_name": "serve-chat",
                "resource.labels.container_name": "vllm",
            }
        },
    }
    # An External AverageValue is the series' sum over the replicas: 80% for each of a replica's 2 GPUs.
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "160"}
    container = pod(result)["spec"]["containers"][0]
    assert container["name"] == "vllm"  # what the selector names
    assert result.one("kubernetes:yaml/v2:ConfigFile")  # the adapter serves external metrics too
    assert result.outputs["serving"]["chat"]["scaling"].startswith("GPU duty cycle")


def test_the_component_checks_what_it_scales_on() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("chat", {**ARGS, "scale_on": "gpu", "queue_target": 3})
    text = str(refused.value)
    assert "scale_on: only allowed with max_replicas" in text
    assert "queue_target: only allowed with max_replicas and scale_on queue" in text
    with pytest.raises(InvalidArgsError, match="duty_cycle_target: 150 is not allowed; must be <= 100"):
        InferenceService.check_args("chat", {**ARGS, "duty_cycle_target": 150})
    with pytest.raises(
        InvalidArgsError, match="duty_cycle_target: only allowed with max_replicas and scale_on gpu"
    ):
        InferenceService.check_args("chat", {**ARGS, "max_replicas": 3, "duty_cycle_target": 60})
