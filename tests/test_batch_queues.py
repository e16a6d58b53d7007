"""`gke-gpu:batch: {kueue: true}` (issue 10, queueing): Kueue and JobSet from their pinned charts, and
per GPU pool a ResourceFlavor and a ClusterQueue sized from the pool, checked against the CRDs
vendored from the same Kueue version (tests/schemas/crds/)."""

import pytest

from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
A100_QUEUED = {
    "name": "a100",
    "accelerator": "nvidia-tesla-a100",
    "gpusPerNode": 2,
    "maxNodes": 3,
    "queuedProvisioning": True,
    "migPartitionSize": "3g.20gb",
}


@pytest.fixture(scope="module")
def batch() -> RunResult:
    return render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4_POOL, A100_QUEUED],
            workloads=[{"name": "nvidia-smi", "pool": "l4"}],
            batch={"kueue": True},
        )
    )


def kueue_object(result: RunResult, kind: str, name: str) -> dict:
    return result.one(f"{KUEUE}:{kind}", name).inputs


def test_kueue_and_jobset_come_from_their_pinned_upstream_charts(batch: RunResult) -> None:
    charts = {r.name: r.inputs for r in batch.of_type("kubernetes:helm.sh/v4:Chart")}
    assert charts["batch-kueue"] == {
        "chart": "oci://registry.k8s.io/kueue/charts/kueue",
        "version": "0.19.2",
        "namespace": "kueue-system",
    }
    assert charts["batch-jobset"] == {
        "chart": "oci://registry.k8s.io/jobset/charts/jobset",
        "version": "0.12.0",
        "namespace": "jobset-system",
    }


def test_a_flavor_per_pool_with_its_node_labels_and_tolerations(batch: RunResult) -> None:
    flavor = kueue_object(batch, "ResourceFlavor", "batch-l4-flavor")
    assert flavor["metadata"]["name"] == "gpu-l4"
    assert flavor["spec"]["nodeLabels"] == {
        "cloud.google.com/gke-nodepool": "l4",
        "cloud.google.com/gke-accelerator": "nvidia-l4",
    }
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in flavor["spec"][
        "tolerations"
    ]


def test_each_cluster_queue_holds_at_most_what_its_pool_can(batch: RunResult) -> None:
    l4 = kueue_object(batch, "ClusterQueue", "batch-l4-cluster-queue")["spec"]
    (group,) = l4["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"]
    (flavor,) = group["flavors"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    # L4 pool: maxNodes 2 of g2-standard-8 (8 vCPUs, 32 GB, 1 GPU), 200 GB boot disks.
    assert quota == {"cpu": 16, "memory": "64Gi", "ephemeral-storage": "400Gi", "nvidia.com/gpu": 2}
    a100 = kueue_object(batch, "ClusterQueue", "batch-a100-cluster-queue")["spec"]
    (flavor,) = a100["resourceGroups"][0]["flavors"]
    # MIG 3g.20gb: two partitions per A100, so 3 nodes x 2 GPUs x 2 = 12 schedulable nvidia.com/gpu.
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]}["nvidia.com/gpu"] == 12


def test_a_queued_pool_gets_a_provisioning_request_admission_check(batch: RunResult) -> None:
    config = kueue_object(batch, "ProvisioningRequestConfig", "batch-a100-provisioning")
    assert config["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert config["spec"]["managedResources"] == ["nvidia.com/gpu"]
    check = kueue_object(batch, "AdmissionCheck", "batch-a100-admission-check")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"] == "dws-a100"
    queue = kueue_object(batch, "ClusterQueue", "batch-a100-cluster-queue")["spec"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [{"name": "dws-a100"}]}
    assert config["spec"]["podSetUpdates"] == {
        "nodeSelector": [
            {
                "key": "autoscaling.gke.io/provisioning-request",
                "valueFromProvisioningClassDetail": "ResizeRequestName",
            }
        ]
    }
    flavor = kueue_object(batch, "ResourceFlavor", "batch-a100-flavor")["spec"]
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in flavor[
        "tolerations"
    ]
    assert (
        "admissionChecksStrategy" not in kueue_object(batch, "ClusterQueue", "batch-l4-cluster-queue")["spec"]
    )


def test_local_queues_in_the_samples_namespace(batch: RunResult) -> None:
    local = kueue_object(batch, "LocalQueue", "batch-l4-local-queue")
    assert local["metadata"]["namespace"] == "gpu-samples"
    assert local["spec"] == {"clusterQueue": "gpu-l4"}


def test_every_kueue_object_is_valid_against_the_vendored_crds(batch: RunResult) -> None:
    objects = [r.inputs for r in batch.resources if r.type.startswith(KUEUE)]
    # 2 flavors, 2 cluster queues, 2 local queues for the samples and 2 for the default team, a
    # provisioning config and an admission check.
    assert len(objects) == 10
    for obj in objects:
        validate(obj)


def test_the_stack_output_lists_the_queues_and_their_quotas(batch: RunResult) -> None:
    queues = {q["pool"]: q for q in batch.outputs["batchQueues"]}
    assert queues["l4"] == {
        "pool": "l4",
        "clusterQueue": "gpu-l4",
        "localQueue": "gpu-samples/gpu-l4",
        "quota": {"cpu": 16, "memory": "64Gi", "ephemeral-storage": "400Gi", "nvidia.com/gpu": 2},
        "admissionCheck": None,
        "cohort": None,
        "topology": None,
        "teams": [{"team": "default", "localQueue": "gpu-jobs/gpu-l4", "clusterQueue": "gpu-l4"}],
    }
    assert queues["a100"]["admissionCheck"] == "dws-a100"


def test_without_teams_a_default_team_can_submit_right_after_pulumi_up() -> None:
    """No samples and no teams: the default team's namespace gpu-jobs has a LocalQueue per pool on the
    pool's own ClusterQueue (before issue 17 there was nothing to submit to)."""
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], batch={"kueue": True}))
    (local,) = result.of_type(f"{KUEUE}:LocalQueue")
    assert local.inputs["metadata"]["namespace"] == "gpu-jobs"
    assert local.inputs["spec"] == {"clusterQueue": "gpu-l4"}
    namespace = result.one("kubernetes:core/v1:Namespace", "batch-team-default-namespace").inputs
    assert namespace["metadata"]["name"] == "gpu-jobs"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert result.outputs["batchQueues"][0]["localQueue"] is None  # the samples' LocalQueue
    queue = kueue_object(result, "ClusterQueue", "batch-l4-cluster-queue")["spec"]
    assert "cohortName" not in queue and queue["namespaceSelector"] == {}


def test_off_by_default() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL]))
    assert result.of_type("gke-gpu:index:GpuBatchQueues") == []
    assert "batchQueues" not in result.outputs


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"cluster": STANDARD_CLUSTER, "batch": {"kueue": True}},
            "gke-gpu:batch.kueue: true needs at least one GPU pool in gke-gpu:gpuPools",
        ),
        (
            {
                "cluster": AUTOPILOT_CLUSTER,
                "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4"}],
                "batch": {"kueue": True},
            },
            "gke-gpu:batch.kueue: true is not allowed with cluster.mode autopilot",
        ),
        (
            {"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "batch": {"kuee": True}},
            "gke-gpu:batch.kuee: unknown key",
        ),
        (
            {"cluster": STANDARD_CLUSTER, "gpuPools": [L4_POOL], "batch": {"kueue": "yes"}},
            "gke-gpu:batch.kueue: 'yes' is not allowed",
        ),
    ],
)
def test_bad_batch_settings_are_refused_by_key(raw: dict, expected: str) -> None:
    assert expected in config_error(raw)


RETRY = {"backoffLimitCount": 5, "backoffBaseSeconds": 120, "backoffMaxSeconds": 3600}


def test_provisioning_retries_reach_the_provisioning_request_config_with_kueues_names() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[L4_POOL, A100_QUEUED],
            batch={"kueue": True, "provisioningRetry": RETRY},
        )
    )
    (config,) = [r.inputs for r in result.of_type(f"{KUEUE}:ProvisioningRequestConfig")]
    assert config["spec"]["retryStrategy"] == RETRY
    validate(config)  # the vendored Kueue v0.19.2 CRD's field names and types


def test_without_provisioning_retries_kueue_keeps_its_defaults(batch: RunResult) -> None:
    (config,) = [r.inputs for r in batch.of_type(f"{KUEUE}:ProvisioningRequestConfig")]
    assert "retryStrategy" not in config["spec"]


@pytest.mark.parametrize(
    ("batch_keys", "pools", "expected"),
    [
        (
            {"kueue": True, "provisioningRetry": RETRY},
            [L4_POOL],
            "gke-gpu:batch.provisioningRetry: only allowed with a queuedProvisioning pool",
        ),
        (
            {"kueue": True, "provisioningRetry": {"backoffBaseSeconds": 600, "backoffMaxSeconds": 60}},
            [A100_QUEUED],
            "gke-gpu:batch.provisioningRetry.backoffMaxSeconds: 60 is less than backoffBaseSeconds 600",
        ),
        (
            {"provisioningRetry": RETRY},
            [A100_QUEUED],
            "gke-gpu:batch.provisioningRetry: only allowed with kueue: true",
        ),
        (
            {"kueue": True, "provisioningRetry": {"backoffLimitCount": -1}},
            [A100_QUEUED],
            "gke-gpu:batch.provisioningRetry.backoffLimitCount",
        ),
    ],
)
def test_bad_provisioning_retries_are_refused_by_key(batch_keys: dict, pools: list, expected: str) -> None:
    assert expected in config_error({"cluster": STANDARD_CLUSTER, "gpuPools": pools, "batch": batch_keys})


def test_a_readiness_timeout_is_written_out_whole_and_none_leaves_kueues_default() -> None:
    from gke_gpu.workloads.kueue_config import KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES, kueue_configuration

    # Left out, Kueue v0.19.2 defaults the block to a 30-minute timeout (defaults.go:48, 99-117).
    assert "waitForPodsReady" not in kueue_configuration()
    assert KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES == 30
    assert kueue_configuration(pods_ready_timeout_minutes=45)["waitForPodsReady"] == {
        "timeout": "45m",
        "recoveryTimeout": "45m",
        "blockAdmission": False,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
    }
