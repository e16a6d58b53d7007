"""A team's training data (issue 28 item 6): buckets through the Cloud Storage FUSE CSI driver and
existing Managed Lustre instances through GKE's Lustre CSI driver, each a PersistentVolume bound to
one claim in each of the team's namespaces, and the account its jobs reach the buckets as (Workload
Identity, a role on each bucket only); the stack file's bad input."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.workloads.training_data import TrainingData, data_service_account_id
from gke_gpu.workloads.training_data_rules import CHECKPOINT_MOUNT_OPTIONS, TRAINING_MOUNT_OPTIONS
from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, config_error, render, stack_config
from tests.egress_eval import egress_allowed
from tests.kubernetes_schemas import validate
from tests.test_teams import MEGA, TEAMS, ZONAL
from tools.offline import RunResult, run_program

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
LUSTRE = {
    "instance": "training-lustre",
    "zone": "us-central1-a",
    "ip": "10.90.0.4",
    "filesystem": "lustrefs",
    "capacityGib": 18000,
}
DATA = [
    {"name": "training", "gcs": {"bucket": "research-training-data"}},
    {
        "name": "checkpoints",
        "gcs": {"bucket": "research-checkpoints", "access": "readWrite", "profile": "checkpoints"},
    },
    {"name": "scratch", "lustre": LUSTRE},
]


def raw(data: list[dict[str, Any]], cluster: dict[str, Any] = ZONAL) -> dict[str, Any]:
    """The `gke-gpu:` keys of a stack whose first team has `data`."""
    teams = [{**TEAMS[0], "data": data}, TEAMS[1]]
    return {"cluster": cluster, "gpuPools": [MEGA], "batch": {"kueue": True, "teams": teams}}


def with_data(data: list[dict[str, Any]], cluster: dict[str, Any] = ZONAL) -> dict[str, Any]:
    return stack_config(**raw(data, cluster))


@pytest.fixture(scope="module")
def rendered() -> RunResult:
    return render(with_data(DATA))


def volume_spec(result: RunResult, name: str) -> dict[str, Any]:
    (volume,) = [r.inputs for r in result.of_type(PV) if r.inputs["metadata"]["name"] == name]
    return volume["spec"]


def test_each_volume_is_bound_to_one_claim_in_each_team_namespace(rendered: RunResult) -> None:
    claims = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs
        for r in rendered.of_type(PVC)
    }
    # The team is on a GPUDirect pool: its GPUDirect jobs run in gpudirect-research, and claims are
    # namespaced, so that namespace gets its own claims (over the same bucket or instance).
    assert sorted(claims) == [
        (namespace, name)
        for namespace in ("gpudirect-research", "research")
        for name in ("checkpoints", "scratch", "training")
    ]
    for (namespace, name), claim in claims.items():
        spec = volume_spec(rendered, f"{namespace}-{name}")
        # Pre-bound both ways, no StorageClass: no other claim takes the volume, nothing is provisioned.
        assert spec["claimRef"] == {"namespace": namespace, "name": name}
        assert claim["spec"]["volumeName"] == f"{namespace}-{name}"
        assert spec["storageClassName"] == claim["spec"]["storageClassName"] == ""
        assert spec["capacity"]["storage"] == claim["spec"]["resources"]["requests"]["storage"]
        # Deleting the volume never deletes the data.
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["accessModes"] == claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_a_bucket_is_mounted_with_gcsfuses_options_for_its_profile(rendered: RunResult) -> None:
    training = volume_spec(rendered, "research-training")
    assert training["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
    assert training["csi"]["volumeHandle"] == "research-training-data"
    assert training["mountOptions"] == list(TRAINING_MOUNT_OPTIONS)
    assert not any(o.startswith("file-cache") for o in training["mountOptions"]), "no unbounded cache"
    checkpoints = volume_spec(rendered, "research-checkpoints")
    assert checkpoints["mountOptions"] == list(CHECKPOINT_MOUNT_OPTIONS)
    assert "write:enable-streaming-writes:true" in checkpoints["mountOptions"]


def test_a_lustre_instance_is_mounted_by_its_handle_address_and_file_system(rendered: RunResult) -> None:
    scratch = volume_spec(rendered, "research-scratch")
    # lustre-csi-driver pkg/csi_driver/volume.go: <project>/<location>/<instance>.
    assert scratch["csi"] == {
        "driver": "lustre.csi.storage.gke.io",
        "volumeHandle": "test-project/us-central1-a/training-lustre",
        "volumeAttributes": {"ip": "10.90.0.4", "filesystem": "lustrefs"},
    }
    assert scratch["capacity"] == {"storage": "18000Gi"}
    assert "mountOptions" not in scratch


def test_jobs_reach_only_their_teams_buckets(rendered: RunResult) -> None:
    roles = {
        (r.inputs["bucket"], r.inputs["role"])
        for r in rendered.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if r.name.startswith("data-")
    }
    assert roles == {
        ("research-training-data", "roles/storage.objectViewer"),
        ("research-checkpoints", "roles/storage.objectUser"),
    }
    # No project-wide storage role for the account.
    account = rendered.one("gcp:serviceaccount/account:Account", "data-research-data-reader")
    assert account.inputs["accountId"] == data_service_account_id("gpu-test", "research")
    assert not [
        r
        for r in rendered.of_type("gcp:projects/iAMMember:IAMMember")
        if "storage" in r.inputs["role"] and "data-" in r.name
    ]
    members = {
        r.inputs["member"]
        for r in rendered.of_type("gcp:serviceaccount/iAMMember:IAMMember")
        if r.name.startswith("data-research-workload-identity")
        and r.inputs["role"] == "roles/iam.workloadIdentityUser"
    }
    assert members == {
        "serviceAccount:test-project.svc.id.goog[research/training-data]",
        "serviceAccount:test-project.svc.id.goog[gpudirect-research/training-data]",
    }
    accounts = [
        r.inputs for r in rendered.of_type("kubernetes:core/v1:ServiceAccount") if r.name.startswith("data-")
    ]
    assert sorted(a["metadata"]["namespace"] for a in accounts) == ["gpudirect-research", "research"]
    for ksa in accounts:
        assert ksa["metadata"]["name"] == "training-data"
        assert "iam.gke.io/gcp-service-account" in ksa["metadata"]["annotations"]
        assert ksa["automountServiceAccountToken"] is False
    assert rendered.outputs["trainingData"] == {
        "research": {
            "namespaces": ["research", "gpudirect-research"],
            "claims": ["training", "checkpoints", "scratch"],
            "serviceAccount": "training-data",
        }
    }


def test_jobs_reach_cloud_storage_through_the_teams_default_deny_egress(rendered: RunResult) -> None:
    # The FUSE sidecar runs in the job's Pod: HTTPS to Cloud Storage's public addresses (here
    # storage.googleapis.com's 142.250.0.0/15 block) and the metadata server's token for Workload
    # Identity. Team namespaces deny other egress (workloads/team_namespaces.py).
    policies = [r.inputs for r in rendered.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]
    job = {"job-name": "train-1"}
    for namespace in ("research", "gpudirect-research"):
        assert egress_allowed(policies, namespace, job, "142.250.4.207", 443), namespace
        assert egress_allowed(policies, namespace, job, "169.254.169.252", 988), namespace
        assert not egress_allowed(policies, namespace, job, "142.250.4.207", 80), namespace
        assert not egress_allowed(policies, namespace, job, "10.0.0.5", 443), namespace
    # A team without buckets opens nothing.
    assert not egress_allowed(policies, "platform-jobs", job, "142.250.4.207", 443)


def test_a_team_without_data_gets_nothing(rendered: RunResult) -> None:
    assert not [r for r in rendered.resources if r.name.startswith("data-platform")]


def test_every_volume_and_claim_is_valid_against_kubernetes_schemas(rendered: RunResult) -> None:
    objects = [r.inputs for r in [*rendered.of_type(PV), *rendered.of_type(PVC)]]
    objects += [
        r.inputs for r in rendered.of_type("kubernetes:core/v1:ServiceAccount") if r.name.startswith("data-")
    ]
    assert len(objects) == 14
    for obj in objects:
        validate(obj)


def test_the_cluster_gets_the_drivers_its_data_needs(rendered: RunResult) -> None:
    addons = rendered.one("gcp:container/cluster:Cluster").inputs["addonsConfig"]
    assert addons == {"gcsFuseCsiDriverConfig": {"enabled": True}, "lustreCsiDriverConfig": {"enabled": True}}
    only_lustre = render(with_data([{"name": "scratch", "lustre": LUSTRE}]))
    addons = only_lustre.one("gcp:container/cluster:Cluster").inputs["addonsConfig"]
    assert addons == {"lustreCsiDriverConfig": {"enabled": True}}


def test_bad_data_is_refused_with_every_problem_named() -> None:
    message = config_error(
        raw(
            [
                {"name": "a", "gcs": {"bucket": "My_Bucket"}},
                {"name": "a", "gcs": {"bucket": "ok-bucket"}},
                {"name": "both", "gcs": {"bucket": "ok-bucket"}, "lustre": LUSTRE},
                {"name": "none"},
                {"name": "lustre", "lustre": LUSTRE},
            ],
            cluster={**ZONAL, "minimumVersion": "1.32"},
        )
    )
    key = "gke-gpu:batch.teams[0].data"
    assert f"{key}[0].gcs.bucket: 'My_Bucket' has 'B', 'M'" in message
    assert f"{key}[1].name: 'a' is listed twice" in message
    assert f"{key}[2]: needs exactly one of gcs (a bucket) and lustre" in message and "it has 2" in message
    assert f"{key}[3]: needs exactly one of gcs" in message and "it has none" in message
    assert (
        f"{key}[4].lustre: needs gke-gpu:cluster.minimumVersion 1.33.2-gke.1111000 or later (GKE's "
        "Managed Lustre CSI driver); it is 1.32"
    ) in message
    assert message.count("gke-gpu:batch.teams[0].data") == 5


@pytest.mark.parametrize(
    ("entry", "key", "says"),
    [
        ({"name": "x", "lustre": {**LUSTRE, "filesystem": "toolongname"}}, "lustre.filesystem", "at most 8"),
        ({"name": "x", "lustre": {**LUSTRE, "ip": "10.0.0.300"}}, "lustre.ip", "10.0.0.300"),
        ({"name": "x", "lustre": {**LUSTRE, "zone": "us-central1"}}, "lustre.zone", "a GCP zone"),
        ({"name": "x", "gcs": {"bucket": "b-ok", "access": "write"}}, "gcs.access", "'read'"),
        ({"name": "Bad", "gcs": {"bucket": "b-ok"}}, "name", "lowercase letters"),
    ],
)
def test_bad_values_name_the_key(entry: dict[str, Any], key: str, says: str) -> None:
    message = config_error(raw([entry]))
    assert f"gke-gpu:batch.teams[0].data[0].{key}" in message and says in message


def test_lustre_on_a_recent_enough_cluster_is_accepted() -> None:
    render(with_data([{"name": "scratch", "lustre": LUSTRE}], cluster={**ZONAL, "minimumVersion": "1.34"}))


def test_data_on_autopilot_is_refused_once_by_the_batch_rule() -> None:
    """Teams (and so their data) need Kueue's queues, which Autopilot clusters do not get: one problem,
    no knock-on ones about the data."""
    message = config_error(raw(DATA, cluster=AUTOPILOT_CLUSTER))
    assert "gke-gpu:batch.kueue: true is not allowed with cluster.mode autopilot" in message
    assert "data" not in message


def test_the_component_refuses_bad_args_before_declaring_anything() -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        TrainingData(
            "td",
            {
                "project": "test-project",
                "cluster_name": "gpu-test",
                "team": "research",
                "namespaces": ["research", "research"],
                "volumes": [
                    {"name": "x", "gcs": {"bucket": "has space"}},
                    {"name": "y"},
                ],
            },
            opts=pulumi.ResourceOptions(provider=provider),
        )

    result = run_program({}, program=program)
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    problems = [str(p) for p in result.error.problems]
    assert any(p.startswith("volumes[0].gcs.bucket: 'has space' has ' '") for p in problems), problems
    assert any(p.startswith("volumes[1]: needs exactly one of gcs") for p in problems), problems
    assert "namespaces: lists a namespace twice" in problems, problems
    assert not [r for r in result.resources if r.name.startswith("td")]


def test_a_team_without_gpudirect_gets_claims_in_its_own_namespace_only() -> None:
    team = {"name": "vision", "pools": {"l4": {"gpus": 1}}, "data": [DATA[0]]}
    result = render(stack_config(cluster=ZONAL, gpuPools=[L4_POOL], batch={"kueue": True, "teams": [team]}))
    claims = [(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]) for r in result.of_type(PVC)]
    assert claims == [("vision", "training")]
    assert result.outputs["trainingData"]["vision"]["namespaces"] == ["vision"]
