"""A MultiKueue fleet (issue 29): a manager cluster holding the teams' queues and GPU workers in other
regions, in one stack file; the objects on each cluster, through that cluster's own provider, valid
against Kueue v0.19.2's CRDs; the credentials the manager gets; and the stack file's bad input."""

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.fleet.kueue_config import DISPATCHERS, manager_configuration
from gke_gpu.fleet.manager import MultiKueueManager
from gke_gpu.fleet.worker_access import RULES, kubeconfig
from gke_gpu.stack.config import parse_settings
from tests.conftest import config_error, render
from tests.kubernetes_schemas import validate
from tools.offline import MOCK_TOKEN_PREFIX, RunResult, run_stack

ROOT = Path(__file__).resolve().parent.parent
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
STACK_FILE = yaml.safe_load((ROOT / "Pulumi.fleet.yaml").read_text())["config"]


def fleet_raw() -> dict[str, Any]:
    """The example's `gke-gpu:` keys, without the namespace."""
    return {k.split(":", 1)[1]: copy.deepcopy(v) for k, v in STACK_FILE.items() if k.startswith("gke-gpu:")}


def fleet_config(raw: dict[str, Any]) -> dict[str, Any]:
    return {"gcp:project": STACK_FILE["gcp:project"], "gcp:region": STACK_FILE["gcp:region"]} | {
        f"gke-gpu:{k}": v for k, v in raw.items()
    }


def errors(raw: dict[str, Any]) -> str:
    return config_error(raw, project=STACK_FILE["gcp:project"], region=STACK_FILE["gcp:region"])


@pytest.fixture(scope="module")
def applied() -> RunResult:
    """The example as `pulumi up` would declare it (outputs computed: the token Secrets filled)."""
    result = run_stack("fleet", preview=False)
    assert result.error is None, result.error
    return result


def kueue_objects(result: RunResult, kind: str) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in result.of_type(f"{KUEUE}:{kind}")}


def provider_of(result: RunResult, urn_name: str) -> str:
    """The Kubernetes provider of a cluster (its GkeCluster's resource name, e.g. `us-east-gke`)."""
    (provider,) = [
        r for r in result.resources if r.type == "pulumi:providers:kubernetes" and r.name == f"{urn_name}-k8s"
    ]
    return provider.urn


def test_the_manager_dispatches_each_team_queue_through_a_multikueue_check(applied: RunResult) -> None:
    checks = kueue_objects(applied, "AdmissionCheck")
    assert checks["multikueue-gpu-h100-research"]["spec"] == {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {
            "apiGroup": "kueue.x-k8s.io",
            "kind": "MultiKueueConfig",
            "name": "multikueue-gpu-h100-research",
        },
    }
    configs = kueue_objects(applied, "MultiKueueConfig")
    # Each team's preference: research in the fleet's order, platform as it lists its workers.
    assert configs["multikueue-gpu-h100-research"]["spec"] == {"clusters": ["us-east", "us-central"]}
    assert configs["multikueue-gpu-h100-platform"]["spec"] == {"clusters": ["us-central", "us-east"]}
    clusters = kueue_objects(applied, "MultiKueueCluster")
    assert clusters["us-east"]["spec"] == {
        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "multikueue-us-east"}}
    }
    assert set(clusters) == {"us-east", "us-central"}


def test_the_manager_queue_holds_the_sum_of_its_workers_quota(applied: RunResult) -> None:
    manager = provider_of(applied, "gke")
    queues = [
        r for r in applied.of_type(f"{KUEUE}:ClusterQueue") if r.provider and r.provider.startswith(manager)
    ]
    by_name = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in queues}
    assert set(by_name) == {"gpu-h100-research", "gpu-h100-platform"}
    research = by_name["gpu-h100-research"]
    assert research["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "multikueue-gpu-h100-research"}]
    }
    (group,) = research["resourceGroups"]
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    # 8 GPUs of the team's on each worker's a3-highgpu-8g pool (208 vCPUs a node: half of 2 nodes each).
    assert quota["nvidia.com/gpu"] == 16
    assert quota["cpu"] == 2 * 208
    # In the pool's cohort, as on the workers: a team borrows what the other leaves idle.
    assert research["cohortName"] == "gpu-h100"
    # The team's namespace only: no other team's LocalQueue can point at it.
    assert research["namespaceSelector"]["matchExpressions"][0]["values"] == ["research"]


def test_every_cluster_gets_its_objects_through_its_own_provider(applied: RunResult) -> None:
    providers = {
        name: provider_of(applied, f"{name}-gke" if name != "manager" else "gke")
        for name in ("manager", "us-east", "us-central")
    }

    def on(resource: Any) -> str:
        return next(
            name for name, urn in providers.items() if resource.provider and resource.provider.startswith(urn)
        )

    # The manager: MultiKueue's objects, its queues' LocalQueues, the workers' kubeconfig Secrets.
    for kind in ("MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck"):
        assert {on(r) for r in applied.of_type(f"{KUEUE}:{kind}") if "multikueue" in str(r.inputs)} == {
            "manager"
        }
    # Each worker: its own queues with the same LocalQueue names in the same namespaces.
    local = {
        (on(r), r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"])
        for r in applied.of_type(f"{KUEUE}:LocalQueue")
    }
    for cluster in providers:
        assert {(cluster, "research", "gpu-h100"), (cluster, "platform", "gpu-h100")} <= local
    accounts = [
        r
        for r in applied.of_type("kubernetes:core/v1:ServiceAccount")
        if r.inputs["metadata"]["name"] == "multikueue"
    ]
    assert sorted(on(r) for r in accounts) == ["us-central", "us-east"]


def test_every_kueue_object_is_valid_against_the_vendored_crds(applied: RunResult) -> None:
    objects = [r.inputs for r in applied.resources if r.type.startswith(KUEUE)]
    kinds = {o["kind"] for o in objects}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue"} <= kinds
    for obj in objects:
        validate(obj)


def test_the_manager_reaches_a_worker_as_kueue_accepts_and_no_token_shows(applied: RunResult) -> None:
    secrets = [r for r in applied.of_type("kubernetes:core/v1:Secret") if r.name.endswith("-kubeconfig")]
    assert {r.inputs["metadata"]["name"] for r in secrets} == {"multikueue-us-east", "multikueue-us-central"}
    for secret in secrets:
        assert secret.inputs["metadata"]["namespace"] == "kueue-system"
        # A Pulumi secret: the render never holds the kubeconfig.
        assert secret.inputs["stringData"] == "[secret]"
    rendered = json.dumps([r.inputs for r in applied.resources]) + json.dumps(applied.outputs, default=str)
    assert MOCK_TOKEN_PREFIX not in rendered
    assert base64.b64encode(MOCK_TOKEN_PREFIX.encode()).decode()[:20] not in rendered


def test_the_kubeconfig_is_one_kueue_accepts() -> None:
    text = kubeconfig("us-east", "10.40.0.2", "Q0E=", "token-value")
    config = yaml.safe_load(text)
    (user,) = config["users"]
    # A bearer token and the CA inline: no exec plugin, auth provider, token or CA file (Kueue v0.19.2
    # refuses those as InsecureKubeConfig).
    assert user["user"] == {"token": "token-value"}
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {"server": "https://10.40.0.2", "certificate-authority-data": "Q0E="}


def test_the_worker_grants_only_what_multikueue_needs_for_jobs_and_jobsets() -> None:
    resources = {(g, r) for rule in RULES for g in rule["apiGroups"] for r in rule["resources"]}
    assert resources == {
        ("batch", "jobs"),
        ("batch", "jobs/status"),
        ("jobset.x-k8s.io", "jobsets"),
        ("jobset.x-k8s.io", "jobsets/status"),
        ("kueue.x-k8s.io", "workloads"),
        ("kueue.x-k8s.io", "workloads/status"),
        ("kueue.x-k8s.io", "clusterqueues"),
        ("kueue.x-k8s.io", "localqueues"),
    }
    assert not any("*" in v for rule in RULES for v in rule["verbs"])


def test_the_dispatcher_reaches_kueues_configuration(applied: RunResult) -> None:
    charts = [r for r in applied.of_type("kubernetes:helm.sh/v4:Chart") if r.name == "fleet-kueue"]
    (chart,) = charts
    config = yaml.safe_load(chart.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["multiKueue"] == {
        "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
        "incrementalDispatcherConfig": {"stepSize": 1},
    }
    assert {"batch/job", "jobset.x-k8s.io/jobset"} <= set(config["integrations"]["frameworks"])
    assert manager_configuration("allAtOnce")["multiKueue"] == {"dispatcherName": DISPATCHERS["allAtOnce"]}


def test_the_render_shows_each_teams_queue_and_the_workers_it_runs_on(applied: RunResult) -> None:
    fleet = applied.outputs["fleet"]
    assert fleet["workerNames"] == ["us-east", "us-central"]
    platform = next(t for t in fleet["teams"] if t["team"] == "platform")
    assert platform["localQueue"] == "platform/gpu-h100"
    assert platform["gpus"] == 16
    assert platform["workers"] == [
        {
            "worker": "us-central",
            "region": "us-central1",
            "accelerator": "nvidia-h100-80gb",
            "teamGpus": 8,
            "mayBorrowGpus": 8,
            "capacity": "flex-start",
        },
        {
            "worker": "us-east",
            "region": "us-east4",
            "accelerator": "nvidia-h100-80gb",
            "teamGpus": 8,
            "mayBorrowGpus": 8,
            "capacity": "flex-start",
        },
    ]


def test_a_queued_provisioning_worker_gets_its_provisioning_request_check() -> None:
    raw = fleet_raw()
    raw["fleet"]["workers"][0]["gpuPools"][0]["queuedProvisioning"] = True
    result = render(fleet_config(raw))
    us_east = provider_of(result, "us-east-gke")
    checks = {
        r.inputs["metadata"]["name"]: (r.provider or "", r.inputs["spec"])
        for r in result.of_type(f"{KUEUE}:AdmissionCheck")
    }
    provider, spec = checks["dws-h100"]
    assert provider.startswith(us_east)
    assert spec["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    # On us-east the team's queue waits for GKE's nodes; on the manager, for MultiKueue.
    strategies = {
        (r.provider or "").startswith(us_east): r.inputs["spec"].get("admissionChecksStrategy")
        for r in result.of_type(f"{KUEUE}:ClusterQueue")
        if r.inputs["metadata"]["name"] == "gpu-h100-research"
        and not (r.provider or "").startswith(provider_of(result, "us-central-gke"))
    }
    assert strategies == {
        True: {"admissionChecks": [{"name": "dws-h100"}]},
        False: {"admissionChecks": [{"name": "multikueue-gpu-h100-research"}]},
    }


BAD = {
    "two workers with one name": (
        lambda f: f["workers"][1].__setitem__("name", "us-east"),
        "gke-gpu:fleet.workers[1].name: 'us-east' names two workers",
    ),
    "a worker that is the manager's cluster": (
        lambda f: (
            f["workers"][1].update(
                region="europe-west4", cluster={"name": "gpu-fleet", "location": "europe-west4-a"}
            ),
            f["workers"][1]["gpuPools"][0].update(
                zones=["europe-west4-a"], accelerator="nvidia-l4", gpusPerNode=8
            ),
        ),
        "gke-gpu:fleet.workers[1].cluster.name: 'gpu-fleet' in europe-west4-a is the manager's cluster",
    ),
    "a queue on the manager, not on a worker it dispatches to": (
        lambda f: f["workers"][1]["batch"]["teams"].pop(1),
        "gke-gpu:fleet.teams[1].queues[0].workers[0]: worker us-central has no queue gpu-h100 for team "
        "platform",
    ),
    "a worker without Kueue": (
        lambda f: f["workers"][0]["batch"].__setitem__("kueue", False),
        "gke-gpu:fleet.workers[0].batch.kueue: 'False' is not allowed; a worker admits the manager's jobs",
    ),
    "a worker without the pool a team's quota names": (
        lambda f: f["workers"][0]["gpuPools"][0].__setitem__("name", "h200"),
        "gke-gpu:fleet.workers[0].batch.teams",
    ),
    "an unknown worker": (
        lambda f: f["teams"][1]["queues"][0].__setitem__("workers", ["eu-west"]),
        "gke-gpu:fleet.teams[1].queues[0].workers[0]: 'eu-west' is not a worker; workers: us-east, "
        "us-central",
    ),
    "ranges that overlap the manager's": (
        lambda f: f["workers"][0]["network"].__setitem__("podsCidr", "10.32.0.0/14"),
        "gke-gpu:fleet.workers[0].network.podsCidr: 10.32.0.0/14 overlaps the manager's "
        "gke-gpu:network.podsCidr",
    ),
    "a namespace the workers do not use": (
        lambda f: f["teams"][0].__setitem__("namespace", "research-jobs"),
        "puts team research's queue in namespace research, the manager in research-jobs",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_fleets_are_refused_by_key_before_anything_is_declared(case: str) -> None:
    change, expected = BAD[case]
    raw = fleet_raw()
    change(raw["fleet"])
    assert expected in errors(raw)


def test_every_independent_problem_in_one_run() -> None:
    raw = fleet_raw()
    for change, _ in BAD.values():
        if change is BAD["a worker that is the manager's cluster"][0]:
            continue
        change(raw["fleet"])
    message = errors(raw)
    assert "workers[1].name" in message and "workers[0].batch.kueue" in message
    assert "teams[1].queues[0].workers[0]" in message


def test_a_credential_in_the_fleet_section_is_refused_without_showing_it() -> None:
    token = (
        "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0."
        "c2lnbmF0dXJlc2ln"
    )
    raw = fleet_raw()
    raw["fleet"]["workers"][0]["batch"]["teams"][0]["namespace"] = token
    raw["fleet"]["workers"][1]["cluster"]["kubeconfig"] = token
    message = errors(raw)
    assert token not in message and token[:20] not in message
    assert "gke-gpu:fleet.workers[0].batch.teams[0].namespace" in message
    assert "gke-gpu:fleet.workers[1].cluster.kubeconfig" in message


def test_the_manager_runs_no_gpu_pools_and_no_second_kueue() -> None:
    raw = fleet_raw()
    raw["gpuPools"] = [{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1}]
    raw["batch"] = {"kueue": True}
    message = errors(raw)
    assert "gke-gpu:gpuPools: 1 pool(s) on the fleet's manager" in message
    assert "gke-gpu:batch.kueue: true is not allowed with gke-gpu:fleet" in message


def test_the_component_refuses_a_queue_for_a_worker_it_does_not_have() -> None:
    args = {
        "workers": [{"name": "us-east", "kubeconfig": "x"}, {"name": "us-east", "kubeconfig": "y"}],
        "queues": [
            {
                "team": "research",
                "namespace": "research",
                "pool": "h100",
                "workers": ["eu-west"],
                "quota": {"gpus": 8, "cpus": 8, "memory_gib": 8, "ephemeral_storage_gib": 8},
            },
        ],
    }
    with pytest.raises(InvalidArgsError) as info:
        MultiKueueManager.check_args("fleet", args)  # type: ignore[attr-defined]
    text = "\n".join(info.value.problems)
    assert "workers[1].name: 'us-east' names two workers" in text
    assert "queues[0].workers[0]: 'eu-west' is not a worker" in text


def test_parse_resolves_every_worker_as_a_cluster_of_its_own() -> None:
    settings, _ = parse_settings(
        fleet_raw(), project=STACK_FILE["gcp:project"], region=STACK_FILE["gcp:region"], stack="fleet"
    )
    assert settings.fleet is not None
    assert [(w.name, w.settings.cluster.name, w.settings.region) for w in settings.fleet.workers] == [
        ("us-east", "gpu-fleet-us-east", "us-east4"),
        ("us-central", "gpu-fleet-us-central", "us-central1"),
    ]


def test_the_manager_reaches_each_workers_private_endpoint(applied: RunResult) -> None:
    clusters = {r.inputs["name"]: r.inputs for r in applied.of_type("gcp:container/cluster:Cluster")}
    # From the manager's region: the workers' private IP endpoint is globally reachable.
    for worker in ("gpu-fleet-us-east", "gpu-fleet-us-central"):
        assert clusters[worker]["privateClusterConfig"]["masterGlobalAccessConfig"] == {"enabled": True}
    assert "masterGlobalAccessConfig" not in clusters["gpu-fleet"]["privateClusterConfig"]
    # And from the manager's VPC: each worker's VPC peered with it, both halves.
    peerings = {
        r.inputs["name"]: r.inputs for r in applied.of_type("gcp:compute/networkPeering:NetworkPeering")
    }
    assert set(peerings) == {"fleet-us-east", "fleet-us-central", "fleet-manager"}
    halves = [
        r for r in applied.of_type("gcp:compute/networkPeering:NetworkPeering") if r.name.endswith("-back")
    ]
    assert len(halves) == 2
    assert peerings["fleet-us-east"]["network"].endswith("/gpu-fleet-vpc")
    assert peerings["fleet-us-east"]["peerNetwork"].endswith("/gpu-fleet-us-east-vpc")
