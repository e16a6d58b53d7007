"""Hyperdisk ML as a gs:// model's weights path (`weights.via: hyperdiskMl`): a read-only-many volume per
zone filled once by the GKE Volume Populator from the bucket, mounted by every replica."""

import hashlib
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    config_error,
    render,
    service_args,
    stack_config,
)
from tests.kubernetes_schemas import SCHEMAS, validate
from tools import offline
from tools.offline import RunResult, run_program

L4 = {**L4_POOL, "driverVersion": "LATEST"}
BUCKET_MODEL = "gs://models-bucket/qwen2.5-1.5b-instruct"
HDML = {"via": "hyperdiskMl", "sizeGib": 50}
CHAT = {"name": "chat", "pool": "l4", "model": BUCKET_MODEL, "weights": HDML}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
SOURCE = "kubernetes:datalayer.gke.io/v1:GCPDataSource"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
ZONES = ["us-central1-a", "us-central1-b", "us-central1-c"]
VENDORED_BLOB = "cb3e7a0164cdc31b20462f407473c04bc35e8c4c"


@pytest.fixture(scope="module")
def served() -> RunResult:
    return render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT]))


def _pod(result: RunResult) -> dict[str, Any]:
    return result.one(DEPLOYMENT).inputs["spec"]["template"]


def test_a_storage_class_makes_one_hyperdisk_ml_disk_per_zone_of_the_pool(served: RunResult) -> None:
    storage_class = served.one(CLASS).inputs
    assert storage_class["provisioner"] == "pd.csi.storage.gke.io"
    assert storage_class["parameters"] == {
        "type": "hyperdisk-ml",
        "provisioned-throughput-on-create": "2400Mi",
        "enable-multi-zone-provisioning": "true",
    }
    assert storage_class["allowedTopologies"] == [
        {"matchLabelExpressions": [{"key": "topology.gke.io/zone", "values": ZONES}]}
    ]
    # The disks are made (and filled) when the claim is, not when a GPU node comes up.
    assert storage_class["volumeBindingMode"] == "Immediate"
    assert storage_class["reclaimPolicy"] == "Delete" and storage_class["allowVolumeExpansion"] is False
    assert storage_class["mountOptions"] == ["read_ahead_kb=4096"]


def test_a_single_zone_pool_gets_one_disk_without_multi_zone_provisioning() -> None:
    pool = {**L4, "zones": ["us-central1-b"]}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[CHAT]))
    storage_class = result.one(CLASS).inputs
    assert "enable-multi-zone-provisioning" not in storage_class["parameters"]
    assert storage_class["allowedTopologies"][0]["matchLabelExpressions"][0]["values"] == ["us-central1-b"]
    volume = result.outputs["serving"]["chat"]["hyperdiskMl"]
    assert (volume["disks"], volume["zones"]) == (1, ["us-central1-b"])
    assert "in us-central1-b" in result.outputs["serving"]["chat"]["weights"]


def test_the_volume_populator_fills_a_read_only_many_claim_from_the_models_folder(served: RunResult) -> None:
    source = served.one(SOURCE).inputs
    name = source["metadata"]["name"]
    assert source["metadata"]["namespace"] == "serve-chat"
    # A folder's URI ends with '/'; the transfer reads it as its own Kubernetes account.
    assert source["spec"] == {
        "cloudStorage": {
            "serviceAccountName": "weights-transfer",
            "uri": "gs://models-bucket/qwen2.5-1.5b-instruct/",
        }
    }
    claim = served.one(CLAIM).inputs
    assert claim["metadata"]["name"] == name and claim["metadata"]["namespace"] == "serve-chat"
    spec = claim["spec"]
    assert spec["accessModes"] == ["ReadOnlyMany"]
    assert spec["dataSourceRef"] == {"apiGroup": "datalayer.gke.io", "kind": "GCPDataSource", "name": name}
    assert spec["resources"] == {"requests": {"storage": "50Gi"}}
    assert spec["storageClassName"] == served.one(CLASS).inputs["metadata"]["name"]
    # Pulumi's claim await gives up after 5 minutes unbound; the Deployment's rollout waits instead.
    assert claim["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_only_the_transfer_may_read_the_bucket_as_the_services_account(served: RunResult) -> None:
    accounts = {
        r.inputs["metadata"]["name"]: r.inputs for r in served.of_type("kubernetes:core/v1:ServiceAccount")
    }
    assert set(accounts["weights-transfer"]["metadata"]["annotations"]) == {"iam.gke.io/gcp-service-account"}
    # The server reads a disk: its account acts as no Google account.
    assert "annotations" not in accounts["vllm"]["metadata"]
    binding = served.one("gcp:serviceaccount/iAMMember:IAMMember").inputs
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert binding["member"] == "serviceAccount:test-project.svc.id.goog[serve-chat/weights-transfer]"
    viewer = served.one("gcp:storage/bucketIAMMember:BucketIAMMember").inputs
    assert (viewer["bucket"], viewer["role"]) == ("models-bucket", "roles/storage.objectViewer")


def test_every_replica_mounts_the_claim_read_only_without_the_fuse_sidecar(served: RunResult) -> None:
    template = _pod(served)
    assert "annotations" not in template["metadata"]  # no gke-gcsfuse/volumes: no sidecar
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["weights"] == {
        "name": "weights",
        "persistentVolumeClaim": {
            "claimName": served.one(CLAIM).inputs["metadata"]["name"],
            "readOnly": True,
        },
    }
    assert "gke-gcsfuse-cache" not in volumes
    (container,) = template["spec"]["containers"]
    assert {"name": "weights", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert container["args"][0] == "/models"
    # `pulumi up` waits for the transfer, then for the server as before (45 minutes each).
    annotations = served.one(DEPLOYMENT).inputs["metadata"]["annotations"]
    assert annotations["pulumi.com/timeoutSeconds"] == "5400"


def test_the_cluster_gets_no_fuse_driver_for_a_hyperdisk_ml_service_alone(served: RunResult) -> None:
    assert "addonsConfig" not in served.one("gcp:container/cluster:Cluster").inputs
    fuse = {"name": "fuse", "pool": "l4", "model": BUCKET_MODEL}
    mixed = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT, fuse]))
    assert mixed.one("gcp:container/cluster:Cluster").inputs["addonsConfig"] == {
        "gcsFuseCsiDriverConfig": {"enabled": True}
    }


def test_one_transfer_compute_class_per_cluster_on_the_nodes_account() -> None:
    second = {**CHAT, "name": "code"}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT, second]))
    compute_class = result.one(COMPUTE_CLASS).inputs
    assert (
        compute_class["metadata"]["name"] == "gcs-to-hdml-compute-class"
    )  # the name GKE's transfer asks for
    spec = compute_class["spec"]
    assert spec["priorities"] == [{"machineFamily": "c3"}, {"machineFamily": "c3d"}]
    assert spec["nodePoolAutoCreation"] == {"enabled": True}
    assert spec["whenUnsatisfiable"] == "DoNotScaleUp"
    assert set(spec["nodePoolConfig"]) == {"serviceAccount"}  # the cluster's nodes' own, not the default
    validate(compute_class)
    component = result.one("gke-gpu:index:HyperdiskMlTransferClass")
    assert result.children_of(component)[0].type == COMPUTE_CLASS
    assert len(result.of_type(CLAIM)) == 2


def test_autopilot_transfer_nodes_take_the_clusters_own_account() -> None:
    pool = {"name": "l4", "accelerator": "nvidia-l4", "driverVersion": "LATEST"}
    result = render(stack_config(cluster=AUTOPILOT_CLUSTER, gpuPools=[pool], serving=[CHAT]))
    assert "nodePoolConfig" not in result.one(COMPUTE_CLASS).inputs["spec"]
    assert result.one(CLASS).inputs["parameters"]["type"] == "hyperdisk-ml"
    assert not any("1.33.3" in w for w in result.warnings)  # the Standard-only version


def test_no_transfer_class_or_volume_without_hyperdisk_ml() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[{**CHAT, "weights": {}}]))
    for kind in (COMPUTE_CLASS, CLASS, CLAIM, SOURCE):
        assert result.of_type(kind) == []
    assert "hyperdiskMl" not in result.outputs["serving"]["chat"]


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"model": "gs://models-bucket/other"}, "model"),
        ({"weights": {**HDML, "sizeGib": 60}}, "size"),
        ({"weights": {**HDML, "throughputMiBps": 4800}}, "throughput"),
        ({"pool_zones": ["us-central1-a"]}, "zones"),
    ],
)
def test_a_change_of_what_is_copied_makes_a_new_volume(served: RunResult, change: dict, what: str) -> None:
    """The populator fills a volume once: a new claim (and StorageClass) is the only way to refill."""
    zones = change.pop("pool_zones", None)
    pool = {**L4, "zones": zones} if zones else L4
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], serving=[{**CHAT, **change}]))
    for kind in (CLAIM, SOURCE, CLASS):
        assert result.one(kind).inputs["metadata"]["name"] != served.one(kind).inputs["metadata"]["name"], (
            what
        )
    claim = result.one(CLAIM).inputs["metadata"]["name"]
    assert result.outputs["serving"]["chat"]["hyperdiskMl"]["claim"] == claim
    assert _pod(result)["spec"]["volumes"][-1]["persistentVolumeClaim"]["claimName"] == claim


def test_every_manifest_is_valid_and_the_data_source_fits_the_published_schema(served: RunResult) -> None:
    manifests = [
        r.inputs for r in served.resources if r.type.startswith("kubernetes:") and "apiVersion" in r.inputs
    ]
    kinds = {m["kind"] for m in manifests}
    assert {
        "StorageClass",
        "PersistentVolumeClaim",
        "GCPDataSource",
        "ComputeClass",
        "ServiceAccount",
    } <= kinds
    for manifest in manifests:
        validate(manifest)
    source = served.one(SOURCE).inputs
    typo = {**source, "spec": {"cloudStorage": {**source["spec"]["cloudStorage"], "serviceAccount": "x"}}}
    with pytest.raises(AssertionError, match="serviceAccount"):
        validate(typo)
    no_slash = {**source, "spec": {"cloudStorage": {**source["spec"]["cloudStorage"], "uri": "gs://b/m"}}}
    with pytest.raises(AssertionError, match="does not match"):
        validate(no_slash)


def test_the_published_data_source_schema_is_vendored_verbatim() -> None:
    data = (SCHEMAS / "crds-catalog/datalayer.gke.io/gcpdatasource_v1.json").read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert blob == VENDORED_BLOB, "re-vendor verbatim and update SOURCES.md and VENDORED_BLOB"
    assert "gcpdatasource_v1.json" in (Path(SCHEMAS) / "SOURCES.md").read_text()


def test_the_output_says_which_path_and_why(served: RunResult) -> None:
    chat = served.outputs["serving"]["chat"]
    weights = chat["weights"]
    assert weights.startswith("Hyperdisk ML 50 GiB at 2400 MiB/s, one disk in each of 3 zones")
    assert "weights.via hyperdiskMl" in weights and "GKE Volume Populator" in weights
    assert "gs://models-bucket/qwen2.5-1.5b-instruct/" in weights and "every replica" in weights
    claim = served.one(CLAIM).inputs["metadata"]["name"]
    assert chat["hyperdiskMl"] == {
        "sizeGib": 50,
        "throughputMiBps": 2400,
        "zones": ZONES,
        "disks": 3,
        "claim": claim,
    }
    assert chat["commands"]["transfer"] == f"kubectl describe pvc -n serve-chat {claim}"
    assert chat["commands"]["wait"].endswith("--timeout=90m")
    assert any(
        "hyperdiskMl needs GKE 1.33.2-gke.4780000" in w and "1.33.3-gke.1136000" in w for w in served.warnings
    )


def test_a_large_volume_gets_at_least_its_minimum_throughput() -> None:
    service = {**CHAT, "weights": {"via": "hyperdiskMl", "sizeGib": 30_000}}
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[service]))
    # 0.12 MiB/s per GiB: 3600 for 30,000 GiB, above the 2400 default.
    assert result.one(CLASS).inputs["parameters"]["provisioned-throughput-on-create"] == "3600Mi"


def test_the_cost_estimate_says_the_volume_is_not_priced(served: RunResult) -> None:
    from tools import cost, plan

    (chat,) = cost.estimate(plan.to_document(served))["services"]
    assert (
        chat["weightsVolume"]
        == "3 Hyperdisk ML disk(s) of 50 GiB at 2400 MiB/s: n/a (no Hyperdisk price in the price data)"
    )
    table = " ".join(line.strip() for line in cost.estimate(plan.to_document(served))["table"])
    assert "whether it serves or not; its weights: 3 Hyperdisk ML disk(s) of 50 GiB" in table


def test_the_volume_waits_for_the_grants_and_the_deployment_for_the_volume(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, list[str]] = {}
    original = offline._RecordingMonitor.RegisterResource

    def recording(self: Any, request: Any) -> Any:
        seen[request.name] = list(request.dependencies)
        return original(self, request)

    monkeypatch.setattr(offline._RecordingMonitor, "RegisterResource", recording)
    result = run_program(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4], serving=[CHAT]))
    assert result.error is None, result.error

    def names(resource: str) -> set[str]:
        return {urn.rsplit("::", 1)[1] for urn in seen[resource]}

    grants = {"serve-chat-weights-viewer", "serve-chat-workload-identity"}
    assert grants | {"serve-chat-transfer-serviceaccount"} <= names("serve-chat-weights-source")
    assert grants | {"serve-chat-weights-source", "serve-chat-weights-class"} <= names(
        "serve-chat-weights-claim"
    )
    assert "serve-chat-weights-claim" in names("serve-chat-deployment")
    # The transfer's ComputeClass exists before any claim asks for a transfer.
    assert "weights-transfer-class" in names("serve-chat")


@pytest.mark.parametrize(
    ("service", "pools", "expected"),
    [
        (
            {**CHAT, "model": "Qwen/Qwen2.5-1.5B-Instruct", "hfTokenSecret": "hf"},
            [L4],
            "gke-gpu:serving[0].weights.via: hyperdiskMl is only allowed with a gs:// model, not a Hugging "
            "Face id ('Qwen/Qwen2.5-1.5B-Instruct')",
        ),
        (
            {**CHAT, "weights": {"via": "hyperdiskMl"}},
            [L4],
            "gke-gpu:serving[0].weights.sizeGib: required with weights.via hyperdiskMl",
        ),
        (
            {**CHAT, "weights": {"sizeGib": 100}},
            [L4],
            "gke-gpu:serving[0].weights.sizeGib: 100 is only allowed with weights.via hyperdiskMl",
        ),
        (
            {**CHAT, "weights": {"via": "cloudStorageFuse", "throughputMiBps": 800}},
            [L4],
            "gke-gpu:serving[0].weights.throughputMiBps: 800 is only allowed with weights.via hyperdiskMl",
        ),
        (
            {**CHAT, "weights": {**HDML, "sizeGib": 10_000, "throughputMiBps": 1000}},
            [L4],
            "gke-gpu:serving[0].weights.throughputMiBps: 1000 is below 1200, the least Compute Engine "
            "provisions for 10000 GiB",
        ),
        ({**CHAT, "weights": {**HDML, "sizeGib": 4}}, [L4], "gke-gpu:serving[0].weights.sizeGib: 4"),
        ({**CHAT, "weights": {**HDML, "sizeGib": 70_000}}, [L4], "gke-gpu:serving[0].weights.sizeGib: 70000"),
        (
            {**CHAT, "weights": {**HDML, "throughputMiBps": 100}},
            [L4],
            "gke-gpu:serving[0].weights.throughputMiBps: 100",
        ),
        ({**CHAT, "weights": {"via": "nfs"}}, [L4], "gke-gpu:serving[0].weights.via: 'nfs' is not allowed"),
        ({**CHAT, "weights": {**HDML, "zones": ["us-central1-a"]}}, [L4], "gke-gpu:serving[0].weights.zones"),
        (
            {**CHAT, "pool": "t4"},
            [{"name": "t4", "accelerator": "nvidia-tesla-t4", "maxNodes": 1, "driverVersion": "LATEST"}],
            "gke-gpu:serving[0].weights.via: hyperdiskMl is not allowed on pool t4 (n1-standard-8): N1 "
            "machines cannot attach Hyperdisk ML volumes",
        ),
    ],
    ids=[
        "hugging-face",
        "no-size",
        "size-with-fuse",
        "throughput-with-fuse",
        "throughput-below-minimum",
        "size-too-small",
        "size-too-large",
        "throughput-too-low",
        "unknown-via",
        "unknown-key",
        "n1-pool",
    ],
)
def test_bad_weights_are_refused_with_the_key(service: dict, pools: list, expected: str) -> None:
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": pools, "serving": [service]})
    assert expected in message, message


def test_a_refused_path_brings_no_follow_on_problem() -> None:
    """A Hugging Face model on an N1 pool, without a size: only the one real problem."""
    t4 = {"name": "t4", "accelerator": "nvidia-tesla-t4", "maxNodes": 1, "driverVersion": "LATEST"}
    hugging_face = {"model": "Qwen/Qwen2.5", "hfTokenSecret": "hf"}
    service = {**CHAT, **hugging_face, "pool": "t4", "weights": {"via": "hyperdiskMl"}}
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [t4], "serving": [service]})
    assert "(1 problem(s))" in message and "only allowed with a gs:// model" in message, message


def test_an_autopilot_t4_profile_is_refused_for_its_machine_series() -> None:
    pool = {"name": "t4", "accelerator": "nvidia-tesla-t4", "driverVersion": "LATEST"}
    message = config_error(
        {"cluster": AUTOPILOT_CLUSTER, "gpuPools": [pool], "serving": [{**CHAT, "pool": "t4"}]}
    )
    assert (
        "gke-gpu:serving[0].weights.via: hyperdiskMl is not allowed on pool t4 (nvidia-tesla-t4): N1"
        in message
    )


def test_an_existing_cluster_is_refused_once_for_the_whole_section() -> None:
    message = config_error(
        {
            "cluster": {"mode": "existing", "flavor": "gke", "kubeconfig": "x"},
            "gpuPools": [L4],
            "serving": [{**CHAT, "weights": {"via": "hyperdiskMl"}}],
        }
    )
    assert "gke-gpu:serving: not allowed with cluster.mode existing" in message
    assert "weights" not in message  # no follow-on problem for what could not be declared anyway


def test_independent_problems_are_listed_together() -> None:
    services = [
        {**CHAT, "weights": {"via": "hyperdiskMl"}},
        {**CHAT, "name": "code", "weights": {"sizeGib": 10}},
    ]
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [L4], "serving": services})
    assert "serving[0].weights.sizeGib: required" in message
    assert "serving[1].weights.sizeGib: 10 is only allowed" in message


ARGS = service_args()
HDML_ARGS = {"via": "hyperdiskMl", "size_gib": 50}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"weights": HDML_ARGS}, "zones: required with weights.via hyperdiskMl"),
        ({"zones": ["us-central1-a"]}, "zones: only allowed with weights.via hyperdiskMl"),
        (
            {"weights": HDML_ARGS, "zones": ["us-central1-a"], "weights_cache_gib": 4},
            "weights_cache_gib: 4 is not allowed with weights.via hyperdiskMl",
        ),
        ({"weights": HDML_ARGS, "zones": ["central"]}, "zones[0]:"),
        ({"weights": {"via": "hyperdiskMl"}, "zones": ["us-central1-a"]}, "weights.size_gib: required"),
        (
            {
                "weights": {**HDML_ARGS, "size_gib": 10_000, "throughput_mi_bps": 500},
                "zones": ["us-central1-a"],
            },
            "weights.throughput_mi_bps: 500 is below 1200",
        ),
        ({"weights": {"via": "hyperdiskMl", "sizeGib": 50}, "zones": ["us-central1-a"]}, "weights.sizeGib:"),
    ],
    ids=["no-zones", "zones-without", "file-cache", "bad-zone", "no-size", "low-throughput", "camel-key"],
)
def test_the_component_refuses_bad_volume_args_by_name(args: dict, expected: str) -> None:
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("chat", {**ARGS, **args})
    assert any(p.startswith(expected) for p in refused.value.problems), refused.value.problems


def test_the_component_names_only_the_real_problem_of_a_refused_path() -> None:
    args = {**ARGS, "model": "Qwen/Qwen2.5", "hf_token_secret": "hf", "weights": {"via": "hyperdiskMl"}}
    with pytest.raises(InvalidArgsError) as refused:
        InferenceService.check_args("chat", args)
    (problem,) = refused.value.problems
    assert problem.startswith("weights.via: hyperdiskMl is only allowed with a gs:// model")


def test_the_component_alone_declares_the_volume_for_its_zones() -> None:
    def program() -> dict[str, Any]:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        service = InferenceService(
            "chat",
            {**ARGS, "weights": {**HDML_ARGS, "throughput_mi_bps": 1200}, "zones": ["us-east1-b"]},  # type: ignore[typeddict-item]
            opts=pulumi.ResourceOptions(provider=provider),
        )
        return {"url": service.service_url}

    result = run_program({}, program=program)
    assert result.error is None, result.error
    storage_class = result.one(CLASS).inputs
    assert storage_class["parameters"]["provisioned-throughput-on-create"] == "1200Mi"
    assert storage_class["allowedTopologies"][0]["matchLabelExpressions"][0]["values"] == ["us-east1-b"]
    component = result.one("gke-gpu:index:InferenceService")
    assert {r.type for r in result.children_of(component)} >= {CLASS, CLAIM, SOURCE}


def test_no_child_name_of_a_service_ends_with_another_childs() -> None:
    """A child's name is `serve-<service>-<suffix>` under the InferenceService's type: if one suffix
    ended with `-<another suffix>`, two services could declare the same URN (service `a`'s
    `transfer-ksa` and service `a-transfer`'s `ksa` did)."""
    pools = [
        {"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 4, "maxNodes": 8, "driverVersion": "LATEST"}
    ]
    every_feature = {
        "name": "chat",
        "pool": "l4",
        "model": "gs://models-bucket/m",
        "gpusPerReplica": 8,
        "replicas": {"min": 1, "max": 2},
        "weights": {"via": "hyperdiskMl", "sizeGib": 100},
    }
    single = {"name": "chat", "pool": "l4", "model": "gs://models-bucket/m", "replicas": {"min": 1, "max": 2}}
    suffixes: set[str] = set()
    for service in (every_feature, single):
        result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=pools, serving=[service]))
        parent = result.one("gke-gpu:index:InferenceService").urn
        suffixes |= {r.name.removeprefix("serve-chat-") for r in result.resources if r.parent == parent}
    clashes = sorted((a, b) for a in suffixes for b in suffixes if a != b and a.endswith(f"-{b}"))
    assert not clashes, clashes
