"""A MultiKueue fleet (issues 29, 34): a manager cluster holding the teams' queues and GPU workers in
other regions, in one stack file; the objects on each cluster, through that cluster's own provider,
valid against Kueue v0.19.2's CRDs; how the manager reaches a worker with no stored credential (GKE's
fleet: ClusterProfiles, Connect Gateway, Workload Identity) and the token opt-in; and the stack file's
bad input."""

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.fleet.manager import MultiKueueManager
from gke_gpu.fleet.manager_access import GATEWAY_ROLES, cluster_profile_name, kueue_fullname
from gke_gpu.fleet.manager_config import DISPATCHERS, manager_configuration
from gke_gpu.stack.config import parse_settings
from tests.conftest import config_error, render, stack_render
from tests.kubernetes_schemas import cel_outcome, validate
from tools.offline import MOCK_TOKEN_PREFIX, RunResult
from tools.prices import load_prices

ROOT = Path(__file__).resolve().parent.parent
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
STACK_FILE = yaml.safe_load((ROOT / "Pulumi.fleet.yaml").read_text())["config"]
PLUGIN = STACK_FILE["gke-gpu:fleet"]["credentialsPluginImage"]


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
    """The example as `pulumi up` would declare it (outputs computed: the fleet Memberships)."""
    result = stack_render("fleet", preview=False)
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


def on_cluster(result: RunResult, urn_name: str) -> list[Any]:
    urn = provider_of(result, urn_name)
    return [r for r in result.resources if (r.provider or "").startswith(urn)]


def manager_kueue_config(result: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
    (chart,) = [r for r in result.of_type("kubernetes:helm.sh/v4:Chart") if r.name == "fleet-kueue"]
    values = chart.inputs["values"]
    return values, yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])


# -- the manager's queues ---------------------------------------------------------------------------


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
    grants = [r for r in applied.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")]
    assert sorted(on(r) for r in grants if r.inputs["metadata"]["name"] == "multikueue-worker-read") == [
        "us-central",
        "us-east",
    ]


def test_every_kueue_object_is_valid_against_the_vendored_crds(applied: RunResult) -> None:
    objects = [r.inputs for r in applied.resources if r.type.startswith(KUEUE)]
    kinds = {o["kind"] for o in objects}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue"} <= kinds
    evaluated = 0
    for obj in objects:
        validate(obj)
        for outcome in cel_outcome(obj):
            assert not outcome.failures, (obj["kind"], obj["metadata"]["name"], outcome.failures)
            evaluated += outcome.evaluated
    # The MultiKueueClusters' "exactly one of kubeConfig and clusterProfileRef" among them.
    assert evaluated > 0


def test_the_cluster_profiles_gke_keeps_are_what_kueue_reads(applied: RunResult) -> None:
    """Each worker's ClusterProfile, in the form Kueue v0.19.2's guide shows a cloud's sync creating
    it (setup_multikueue.md:206-223), under the name the MultiKueueCluster refers to, with the access
    provider the manager's Kueue has a plugin for: valid against the vendored ClusterProfile CRD."""
    _, config = manager_kueue_config(applied)
    (provider,) = config["multiKueue"]["clusterProfile"]["accessProviders"]
    for worker, reference in applied.outputs["fleet"]["clusterProfiles"].items():
        namespace, name = reference.split("/")
        profile = {
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"x-k8s.io/cluster-manager": "gke-fleet"},
            },
            "spec": {"clusterManager": {"name": "gke-fleet"}, "displayName": name},
            "status": {
                "accessProviders": [{"name": provider["name"], "cluster": {"server": "https://gateway"}}]
            },
        }
        validate(profile)
        assert all(not outcome.failures for outcome in cel_outcome(profile))
        # Kueue reads ClusterProfiles in its own namespace only (multikueuecluster.go:1054-1057).
        assert namespace == "kueue-system"
        assert kueue_objects(applied, "MultiKueueCluster")[worker]["spec"]["clusterSource"] == {
            "clusterProfileRef": {"name": name}
        }


def test_the_dispatcher_reaches_kueues_configuration(applied: RunResult) -> None:
    _, config = manager_kueue_config(applied)
    assert config["multiKueue"]["dispatcherName"] == "kueue.x-k8s.io/multikueue-dispatcher-incremental"
    assert config["multiKueue"]["incrementalDispatcherConfig"] == {"stepSize": 1}
    assert {"batch/job", "jobset.x-k8s.io/jobset"} <= set(config["integrations"]["frameworks"])
    assert manager_configuration("allAtOnce")["multiKueue"] == {"dispatcherName": DISPATCHERS["allAtOnce"]}


# -- no stored credential: the fleet --------------------------------------------------------------


def test_every_cluster_is_a_member_of_the_fleet_and_the_manager_its_hub(applied: RunResult) -> None:
    clusters = {r.inputs["name"]: r.inputs for r in applied.of_type("gcp:container/cluster:Cluster")}
    for name in ("gpu-fleet", "gpu-fleet-us-east", "gpu-fleet-us-central"):
        assert clusters[name]["fleet"] == {"project": STACK_FILE["gcp:project"]}
    # GKE's ClusterProfile sync, on the manager only, into Kueue's namespace.
    hub = {
        "fleet-clusterinventory-management-cluster": "true",
        "fleet-clusterinventory-namespace": "kueue-system",
    }
    assert hub.items() <= clusters["gpu-fleet"]["resourceLabels"].items()
    assert not any("fleet-clusterinventory" in k for k in clusters["gpu-fleet-us-east"]["resourceLabels"])


def test_the_manager_reaches_each_worker_through_its_cluster_profile(applied: RunResult) -> None:
    clusters = kueue_objects(applied, "MultiKueueCluster")
    assert set(clusters) == {"us-east", "us-central"}
    # GKE keeps a ClusterProfile per member named <membership>-<location>; the cluster's Membership
    # is regional (the mocks' stand-in, as the provider reports it).
    assert clusters["us-east"]["spec"] == {
        "clusterSource": {"clusterProfileRef": {"name": "gpu-fleet-us-east-us-east4"}}
    }
    assert applied.outputs["fleet"]["clusterProfiles"] == {
        "us-east": "kueue-system/gpu-fleet-us-east-us-east4",
        "us-central": "kueue-system/gpu-fleet-us-central-us-central1",
    }
    values, config = manager_kueue_config(applied)
    # The alpha gate (off by default in 0.19.2), and the plugin for the sync's access provider.
    assert values["controllerManager"] == {
        "featureGates": [{"name": "MultiKueueClusterProfile", "enabled": True}]
    }
    assert config["multiKueue"]["clusterProfile"] == {
        "accessProviders": [
            {
                "name": "google",
                "execConfig": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "command": "/plugins/gcp-auth-plugin",
                    "interactiveMode": "Never",
                },
            }
        ]
    }


def test_no_token_secret_and_no_credential_anywhere(applied: RunResult) -> None:
    secrets = applied.of_type("kubernetes:core/v1:Secret")
    assert not [s for s in secrets if s.inputs.get("type") == "kubernetes.io/service-account-token"]
    assert not [s for s in secrets if s.inputs["metadata"].get("namespace") == "kueue-system"]
    rendered = json.dumps([r.inputs for r in applied.resources]) + json.dumps(applied.outputs, default=str)
    assert MOCK_TOKEN_PREFIX not in rendered
    assert "[secret]" not in json.dumps(applied.outputs["fleet"], default=str)


def test_kueue_acts_as_a_google_account_with_connect_gateways_roles_only(applied: RunResult) -> None:
    (account,) = [
        r for r in applied.of_type("gcp:serviceaccount/account:Account") if r.name == "fleet-kueue-identity"
    ]
    email = f"{account.inputs['accountId']}@{STACK_FILE['gcp:project']}.iam.gserviceaccount.com"
    roles = sorted(
        r.inputs["role"]
        for r in applied.of_type("gcp:projects/iAMMember:IAMMember")
        if r.inputs["member"] == f"serviceAccount:{email}"
    )
    assert roles == sorted(GATEWAY_ROLES) == ["roles/container.clusterViewer", "roles/gkehub.gatewayEditor"]
    # Only Kueue's own Kubernetes account (the chart's, named after the release) may act as it.
    controller = f"{kueue_fullname('fleet-kueue')}-controller-manager"
    assert controller == "fleet-kueue-controller-manager"
    (identity,) = [
        r
        for r in applied.of_type("gcp:serviceaccount/iAMMember:IAMMember")
        if r.name == "fleet-kueue-workload-identity"
    ]
    assert identity.inputs["role"] == "roles/iam.workloadIdentityUser"
    assert (
        identity.inputs["member"]
        == f"serviceAccount:example-gpu-fleet.svc.id.goog[kueue-system/{controller}]"
    )
    (patch,) = applied.of_type("kubernetes:core/v1:ServiceAccountPatch")
    assert patch.inputs["metadata"] == {
        "name": controller,
        "namespace": "kueue-system",
        "annotations": {"iam.gke.io/gcp-service-account": email},
    }


def test_kueues_pod_gets_the_credentials_plugin_and_nothing_else(applied: RunResult) -> None:
    (patch,) = applied.of_type("kubernetes:apps/v1:DeploymentPatch")
    assert patch.inputs["metadata"] == {"name": "fleet-kueue-controller-manager", "namespace": "kueue-system"}
    spec = patch.inputs["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["image"] == PLUGIN
    assert [*init["command"], *init["args"]] == ["cp", "/gcp-auth-plugin", "/plugins/gcp-auth-plugin"]
    assert init["securityContext"]["runAsNonRoot"] is True
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert init["resources"]["limits"] == {"cpu": "100m", "memory": "64Mi"}
    (manager,) = spec["containers"]
    assert manager == {
        "name": "manager",
        "volumeMounts": [{"name": "clusterprofile-plugins", "mountPath": "/plugins", "readOnly": True}],
    }
    assert set(spec) == {"initContainers", "containers", "volumes"}


def test_a_worker_grants_the_manager_reads_everywhere_and_writes_in_the_fleets_namespaces(
    applied: RunResult,
) -> None:
    east = on_cluster(applied, "us-east-gke")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in east:
        if r.type.startswith("kubernetes:rbac.authorization.k8s.io/v1:") and "multikueue" in r.name:
            by_kind.setdefault(r.type.rsplit(":", 1)[1], []).append(r.inputs)
    (email,) = {
        s["name"]
        for kind in ("ClusterRoleBinding", "RoleBinding")
        for binding in by_kind[kind]
        for s in binding["subjects"]
    }
    assert email.endswith(".iam.gserviceaccount.com")
    (reader_binding,) = by_kind["ClusterRoleBinding"]
    assert reader_binding["roleRef"]["name"] == "multikueue-worker-read"
    assert reader_binding["subjects"] == [
        {"kind": "User", "name": email, "apiGroup": "rbac.authorization.k8s.io"}
    ]
    writers = {b["metadata"]["namespace"]: b["roleRef"]["name"] for b in by_kind["RoleBinding"]}
    assert writers == {"research": "multikueue-worker-write", "platform": "multikueue-worker-write"}
    roles = {r["metadata"]["name"]: r["rules"] for r in by_kind["ClusterRole"]}
    reads = {v for rule in roles["multikueue-worker-read"] for v in rule["verbs"]}
    assert reads <= {"get", "list", "watch"}
    writes = {
        (g, res, v)
        for rule in roles["multikueue-worker-write"]
        for g in rule["apiGroups"]
        for res in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("batch", "jobs", "create") in writes and ("kueue.x-k8s.io", "workloads/status", "patch") in writes
    assert not any("*" in str(rule) for rules in roles.values() for rule in rules)
    # No account of its own on a worker reached through the fleet: nothing to hold a token for.
    assert not [
        r
        for r in east
        if r.type == "kubernetes:core/v1:ServiceAccount" and r.inputs["metadata"]["name"] == "multikueue"
    ]


def test_the_manager_needs_no_route_to_a_fleet_workers_endpoint(applied: RunResult) -> None:
    # Connect Gateway reaches a member's control plane: no peering, no global access for it.
    assert not applied.of_type("gcp:compute/networkPeering:NetworkPeering")
    clusters = {r.inputs["name"]: r.inputs for r in applied.of_type("gcp:container/cluster:Cluster")}
    assert "masterGlobalAccessConfig" not in clusters["gpu-fleet-us-east"]["privateClusterConfig"]


def test_the_cluster_profile_name_and_kueues_names_follow_their_sources() -> None:
    membership = "//gkehub.googleapis.com/projects/p/locations/us-west1/memberships/multikueue-worker"
    # Google's sample: cluster multikueue-worker in us-west1 -> ClusterProfile multikueue-worker-us-west1.
    assert cluster_profile_name(membership) == "multikueue-worker-us-west1"
    assert cluster_profile_name(None) == cluster_profile_name("x") == ""
    # The chart's kueue.fullname: a release containing "kueue" is the name itself.
    assert kueue_fullname("kueue") == "kueue"
    assert kueue_fullname("fleet-kueue") == "fleet-kueue"
    assert kueue_fullname("batch") == "batch-kueue"


# -- admission means capacity ----------------------------------------------------------------------


def test_each_worker_queue_behind_a_fleet_queue_admits_only_with_capacity(applied: RunResult) -> None:
    for worker in ("us-east-gke", "us-central-gke"):
        queues = {
            r.inputs["metadata"]["name"]: r.inputs["spec"]
            for r in on_cluster(applied, worker)
            if r.type == f"{KUEUE}:ClusterQueue"
        }
        for team in ("research", "platform"):
            assert queues[f"gpu-h100-{team}"]["admissionChecksStrategy"] == {
                "admissionChecks": [{"name": "dws-h100"}]
            }
    rows = {row["team"]: row for row in applied.outputs["fleet"]["teams"]}
    assert {w["admission"] for w in rows["research"]["workers"]} == {"ProvisioningRequest"}


def _worker_kueue_config(result: Any, worker: str) -> dict[str, Any]:
    (chart,) = [
        r
        for r in on_cluster(result, f"{worker}-gke")
        if r.type == "kubernetes:helm.sh/v4:Chart" and r.name.endswith("-kueue")
    ]
    values = chart.inputs["values"]
    assert values is not None, "a fleet worker's Kueue always gets its Configuration"
    return yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])


def _admissions(result: Any) -> dict[str, dict[str, Any]]:
    rows = {row["team"]: row for row in result.outputs["fleet"]["teams"]}
    return {w["worker"]: w for w in rows["research"]["workers"]}


def test_every_worker_writes_kueues_default_readiness_timeout_into_its_configuration() -> None:
    # Kueue v0.19.2 turns waitForPodsReady on with a 30-minute timeout when the block is left out
    # (apis/config/v1beta2/defaults.go:48, 99-117): the fleet writes exactly that, so the render shows it.
    result = render(fleet_config(fleet_raw()))
    for worker in ("us-east", "us-central"):
        assert _worker_kueue_config(result, worker)["waitForPodsReady"] == {
            "timeout": "30m",
            "recoveryTimeout": "30m",
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        }


def test_a_flex_start_pool_without_queued_provisioning_fails_over_by_the_readiness_timeout() -> None:
    raw = fleet_raw()
    raw["fleet"]["workers"][0]["gpuPools"][0].pop("queuedProvisioning")
    result = render(fleet_config(raw))
    east = _admissions(result)["us-east"]
    assert east["admission"] == "waitForPodsReady"
    assert "its flex-start nodes come after admission" in east["admissionWhy"]
    assert "not all ready 30 minutes after admission (Kueue's default" in east["admissionWhy"]
    assert "queuedProvisioning: true would admit it only once its nodes are coming" in east["admissionWhy"]
    assert _admissions(result)["us-central"]["admission"] == "ProvisioningRequest"


def test_an_on_demand_pool_fails_over_by_the_readiness_timeout_the_key_sets() -> None:
    raw = fleet_raw()
    central = raw["fleet"]["workers"][1]
    for key in ("flexStart", "queuedProvisioning"):
        central["gpuPools"][0].pop(key)
    central["gpuPools"][0]["spot"] = True
    central["podsReadyTimeoutMinutes"] = 20
    result = render(fleet_config(raw))
    assert _worker_kueue_config(result, "us-central")["waitForPodsReady"]["timeout"] == "20m"
    assert _worker_kueue_config(result, "us-east")["waitForPodsReady"]["timeout"] == "30m"
    workers = _admissions(result)
    assert {name: w["admission"] for name, w in workers.items()} == {
        "us-east": "ProvisioningRequest",
        "us-central": "waitForPodsReady",
    }
    assert (
        "not all ready 20 minutes after admission (podsReadyTimeoutMinutes)"
        in (workers["us-central"]["admissionWhy"])
    )


# -- every fleet queue can be admitted -------------------------------------------------------------


def _dranet_east(raw: dict[str, Any]) -> None:
    """us-east's h100 pool an A4 (B200) RDMA pool on DRANET."""
    east = raw["fleet"]["workers"][0]
    east["gpuPools"][0].update(
        accelerator="nvidia-b200", gpudirect=True, gpudirectNetworking="dranet", zones=["us-east4-b"]
    )
    east["cluster"].update(minimumVersion="1.34", location="us-east4-b")


def test_a_fleet_queue_over_a_dranet_pool_is_refused_by_key_and_why() -> None:
    raw = fleet_raw()
    _dranet_east(raw)
    message = errors(raw)
    assert (
        "gke-gpu:fleet.teams[0].queues[0].pool: 'h100' is a DRANET pool on worker(s) us-east; a fleet queue"
        in message
    )
    assert "pkg/dra/claims.go" in message


def test_a_fleet_queue_over_workers_whose_nodes_differ_is_refused() -> None:
    raw = fleet_raw()
    central = raw["fleet"]["workers"][1]
    central["gpuPools"][0].update(accelerator="nvidia-h200-141gb", zones=["us-central1-b"])
    central["cluster"]["location"] = "us-central1-b"
    message = errors(raw)
    assert (
        "gke-gpu:fleet.teams[0].queues[0].pool: 'h100' differs between the workers of team research's queue"
        in message
    )
    assert "us-east: nvidia-h100-80gb, 8 GPUs a node; us-central: nvidia-h200-141gb, 8 GPUs a node" in message


# -- the token opt-in ------------------------------------------------------------------------------


def _token_worker(raw: dict[str, Any]) -> dict[str, Any]:
    central = raw["fleet"]["workers"][1]
    central["access"] = "token"
    return central


def test_a_worker_outside_the_fleets_project_needs_the_opt_in() -> None:
    raw = fleet_raw()
    raw["fleet"]["workers"][1]["project"] = "other-gpu-project"
    assert (
        "gke-gpu:fleet.workers[1].project: 'other-gpu-project' is not the fleet's project (example-gpu-fleet)"
        in errors(raw)
    )


def test_a_token_worker_gets_namespaced_rbac_a_route_and_a_note_but_no_token() -> None:
    raw = fleet_raw()
    worker = _token_worker(raw)
    worker["project"] = "other-gpu-project"
    result = render(fleet_config(raw), preview=False)
    clusters = {r.inputs["name"]: r.inputs for r in result.of_type("gcp:container/cluster:Cluster")}
    central = clusters["gpu-fleet-us-central"]
    assert central["project"] == "other-gpu-project"
    assert "fleet" not in central  # not a member of the fleet
    assert central["privateClusterConfig"]["masterGlobalAccessConfig"] == {"enabled": True}
    # The manager's Kueue Pod (its Pod range: GKE keeps a Pod's address to RFC 1918 destinations) and
    # nodes are the worker's authorized networks; the fleet worker gets none (Connect Gateway).
    assert central["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [
        {"cidrBlock": "10.30.0.0/20", "displayName": "fleet manager nodes"},
        {"cidrBlock": "10.32.0.0/14", "displayName": "fleet manager pods"},
    ]
    assert "cidrBlocks" not in clusters["gpu-fleet-us-east"]["masterAuthorizedNetworksConfig"]
    peerings = {r.inputs["name"] for r in result.of_type("gcp:compute/networkPeering:NetworkPeering")}
    assert peerings == {"fleet-us-central", "fleet-manager"}
    specs = {name: spec["spec"] for name, spec in kueue_objects(result, "MultiKueueCluster").items()}
    assert specs["us-central"] == {
        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "multikueue-us-central"}}
    }
    assert "clusterProfileRef" in specs["us-east"]["clusterSource"]
    # The account on the worker, bound namespaced for writes; no token Secret, no kubeconfig Secret.
    mine = on_cluster(result, "us-central-gke")
    (account,) = [
        r
        for r in mine
        if r.type == "kubernetes:core/v1:ServiceAccount" and r.inputs["metadata"]["name"] == "multikueue"
    ]
    assert account.inputs["automountServiceAccountToken"] is False
    bindings = [
        r.inputs
        for r in mine
        if r.type.endswith(":RoleBinding") and r.inputs["metadata"]["name"] == "multikueue-worker-write"
    ]
    assert {b["metadata"]["namespace"] for b in bindings} == {"research", "platform"}
    assert not [
        s for s in result.of_type("kubernetes:core/v1:Secret") if "multikueue" in s.inputs["metadata"]["name"]
    ]
    assert MOCK_TOKEN_PREFIX not in json.dumps([r.inputs for r in result.resources])
    summary = next(w for w in result.outputs["fleet"]["workers"] if w["name"] == "us-central")
    assert summary["access"]["mode"] == "token"
    assert "create token multikueue --duration=24h" in summary["access"]["createToken"]
    assert any("gke-gpu:fleet.workers[1].access: token" in w for w in result.warnings)


def test_a_token_workers_own_authorized_networks_come_first_and_are_not_repeated() -> None:
    raw = fleet_raw()
    worker = _token_worker(raw)
    worker["cluster"]["masterAuthorizedNetworks"] = [
        {"cidrBlock": "203.0.113.0/24", "displayName": "office"},
        {"cidrBlock": "10.30.0.0/20", "displayName": "manager subnet"},
    ]
    result = render(fleet_config(raw))
    (central,) = [
        r.inputs
        for r in result.of_type("gcp:container/cluster:Cluster")
        if r.inputs["name"] == "gpu-fleet-us-central"
    ]
    assert [b["cidrBlock"] for b in central["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == [
        "203.0.113.0/24",
        "10.30.0.0/20",
        "10.32.0.0/14",
    ]


def test_the_credentials_plugin_is_required_with_a_fleet_worker_only() -> None:
    raw = fleet_raw()
    del raw["fleet"]["credentialsPluginImage"]
    assert (
        "gke-gpu:fleet.credentialsPluginImage: required: the manager's Kueue reaches worker(s) us-east, "
        "us-central" in errors(raw)
    )
    for worker in raw["fleet"]["workers"]:
        worker["access"] = "token"
    settings, _ = parse_settings(
        raw, project=STACK_FILE["gcp:project"], region=STACK_FILE["gcp:region"], stack="fleet"
    )
    assert settings.fleet is not None and settings.fleet.plan.through_fleet() == []
    raw["fleet"]["credentialsPluginImage"] = PLUGIN
    assert "gke-gpu:fleet.credentialsPluginImage: only allowed with a worker of access: fleet" in errors(raw)


# -- workers are first-class -----------------------------------------------------------------------


def test_a_workers_notes_reach_the_render_keyed_under_the_worker() -> None:
    result = stack_render("fleet")
    # The flex-start queued-provisioning version note a single-cluster stack's pool gets.
    notes = [w for w in result.warnings if "queuedProvisioning uses flex-start VMs" in w]
    assert [n.split(": ", 2)[1] for n in notes] == [
        "gke-gpu:fleet.workers[0].gpuPools[0]",
        "gke-gpu:fleet.workers[1].gpuPools[0]",
    ]


def test_the_outputs_follow_a_job_from_the_manager_to_its_workers_pods(applied: RunResult) -> None:
    for summary in applied.outputs["fleet"]["workers"]:
        follow = summary["follow"]
        assert f"get multikueuecluster {summary['name']}" in follow["managerWorkerActive"]
        assert (
            f"get-credentials {summary['cluster']} --location {summary['location']}"
            in follow["workerCredentials"]
        )
        # Kueue v0.19.2 writes the Workload's name as an annotation (WorkloadIdentifierAnnotations,
        # Beta and on: jobframework/utils.go:231-259): no label selector finds it; a column shows it.
        assert "-l kueue.x-k8s.io/prebuilt-workload-name" not in follow["workerJobs"]
        assert (
            "-l kueue.x-k8s.io/multikueue-origin -o custom-columns='KIND:.kind,NAME:.metadata.name,"
            "WORKLOAD:.metadata.annotations.kueue\\.x-k8s\\.io/prebuilt-workload-name'"
        ) in follow["workerJobs"]
        assert "provisioningrequests" in follow["workerProvisioningRequests"]
        # Kueue reads ClusterProfiles only if their CRD was there when it started (config.go:254-259).
        controller = f"deployment/{kueue_fullname('fleet-kueue')}-controller-manager"
        assert follow["managerClusterProfiles"].startswith(
            "kubectl get crd clusterprofiles.multicluster.x-k8s.io && "
        )
        assert "Skipping MultiKueue ClusterProfile" in follow["managerKueueSkippedClusterProfiles"]
        assert follow["managerKueueRestart"] == f"kubectl -n kueue-system rollout restart {controller}"
        for command in follow.values():
            # Every command is one the shell can run as given (placeholders filled in).
            filled = command.replace("<namespace>", "ns").replace("<job>", "j").replace("<workload>", "w")
            checked = subprocess.run(["bash", "-n", "-c", filled], capture_output=True, text=True)
            assert checked.returncode == 0, (command, checked.stderr)
        # The worker's GPU pools, priced per worker by the render's cost table (tools/cost.py).
        assert summary["gpuPools"][0]["machineType"] == "a3-highgpu-8g"


# -- bad input ---------------------------------------------------------------------------------------

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
    "a token worker's ranges that overlap the manager's": (
        lambda f: (
            f["workers"][0].__setitem__("access", "token"),
            f["workers"][0]["network"].__setitem__("podsCidr", "10.32.0.0/14"),
        ),
        "gke-gpu:fleet.workers[0].network.podsCidr: 10.32.0.0/14 overlaps the manager's "
        "gke-gpu:network.podsCidr",
    ),
    "a namespace the workers do not use": (
        lambda f: f["teams"][0].__setitem__("namespace", "research-jobs"),
        "puts team research's queue in namespace research, the manager in research-jobs",
    ),
    "a worker of another mode": (
        lambda f: f["workers"][1]["cluster"].__setitem__("mode", "autopilot"),
        "gke-gpu:fleet.workers[1].cluster.mode: 'autopilot' is not allowed for a worker; allowed: standard",
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
    for name, (change, _) in BAD.items():
        if name in ("a worker that is the manager's cluster", "a worker of another mode"):
            continue
        change(raw["fleet"])
    message = errors(raw)
    assert "workers[1].name" in message and "workers[0].batch.kueue" in message
    assert "teams[1].queues[0].workers[0]" in message


def test_a_workers_own_problem_is_keyed_under_it_with_no_regex_and_no_follow_on() -> None:
    raw = fleet_raw()
    raw["fleet"]["workers"][1]["gpuPools"][0]["maxNodes"] = 0
    raw["fleet"]["workers"][1]["region"] = "us-centrall1"
    message = errors(raw)
    assert "gke-gpu:fleet.workers[1].gpuPools[0].maxNodes: 0 is not allowed; must be >= 1" in message
    assert "gke-gpu:fleet.workers[1].region: 'us-centrall1' is not a Compute Engine region" in message
    assert "gke-gpu:gpuPools" not in message and "gcp:region" not in message


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


def test_the_component_refuses_what_its_rules_refuse() -> None:
    args = {
        "workers": [
            {
                "name": "us-east",
                "fleet_membership": "//gkehub.googleapis.com/projects/p/locations/l/memberships/m",
            },
            {"name": "us-east"},
        ],
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
    assert "fleet_access: required with a worker reached through its ClusterProfile" in text


def test_parse_resolves_every_worker_as_a_cluster_of_its_own() -> None:
    settings, _ = parse_settings(
        fleet_raw(), project=STACK_FILE["gcp:project"], region=STACK_FILE["gcp:region"], stack="fleet"
    )
    assert settings.fleet is not None
    assert [(w.name, w.settings.cluster.name, w.settings.region) for w in settings.fleet.workers] == [
        ("us-east", "gpu-fleet-us-east", "us-east4"),
        ("us-central", "gpu-fleet-us-central", "us-central1"),
    ]


def test_the_cost_table_prices_every_workers_gpu_pools_and_clusters() -> None:
    from tools.cost import estimate
    from tools.plan import to_document

    raw = fleet_raw()
    # Spot on us-central (a price the table has), with the readiness timeout such a pool needs.
    central = raw["fleet"]["workers"][1]
    for key in ("flexStart", "queuedProvisioning"):
        central["gpuPools"][0].pop(key)
    central["gpuPools"][0]["spot"] = True
    central["podsReadyTimeoutMinutes"] = 30
    cost = estimate(to_document(render(fleet_config(raw))))
    assert cost["error"] is None
    pools = {p["name"]: p for p in cost["pools"]}
    assert set(pools) == {"us-east/h100", "us-central/h100"}
    spot = pools["us-central/h100"]
    assert spot["expected"] == "spot" and spot["gpusAtMax"] == 16
    # Priced in the worker's region, not the manager's.
    node = load_prices().regions["us-central1"]["a3-highgpu-8g"].spot
    assert spot["hourly"]["atMax"]["spot"] == pytest.approx(2 * node)
    # One management fee per cluster: the manager and its two workers.
    assert cost["managementFee"]["hourly"] == pytest.approx(0.30)
    assert any("us-central in us-central1" in note for note in cost["notes"])
