"""A fleet team queue reaches the Pods its workers run where they can run (issue 29 review): on a
GPUDirect pool, the manager also queues from the team's `gpudirect-<team>` namespace, where the
workers admit GPUDirect Pods; a `draGpus` pool is refused, since MultiKueue dispatches the Job and not
its ResourceClaimTemplate and the manager's Kueue does not count a claimed GPU."""

from typing import Any

import pytest

from tests.conftest import DRA_L4_POOL, render
from tests.kubernetes_schemas import validate
from tests.test_fleet import KUEUE, errors, fleet_config, fleet_raw, provider_of
from tools.offline import RunResult

ENFORCE = "pod-security.kubernetes.io/enforce"


def _gpudirect_fleet() -> dict[str, Any]:
    """The example with both workers' h100 pools on A3 Mega GPUDirect (TCPXO): pools alike under one
    queue."""
    raw = fleet_raw()
    for worker, cidr in zip(raw["fleet"]["workers"], ("192.168.0.0/16", "172.16.0.0/16"), strict=True):
        worker["gpuPools"][0].update(accelerator="nvidia-h100-mega-80gb", gpudirect=True)
        worker["network"]["gpudirectCidr"] = cidr
    return raw


@pytest.fixture(scope="module")
def gpudirect() -> RunResult:
    return render(fleet_config(_gpudirect_fleet()))


def _on(result: RunResult, cluster: str) -> list[Any]:
    urn = provider_of(result, cluster)
    return [r for r in result.resources if (r.provider or "").startswith(urn)]


def _manager_cluster(result: RunResult) -> str:
    """The manager's GkeCluster resource name: the cluster whose provider is neither worker's."""
    names = {r.name.removesuffix("-k8s") for r in result.resources if r.type == "pulumi:providers:kubernetes"}
    (manager,) = names - {"us-east-gke", "us-central-gke"}
    return manager


def _namespaces(resources: list[Any]) -> list[dict[str, Any]]:
    return [r.inputs["metadata"] for r in resources if r.type == "kubernetes:core/v1:Namespace"]


def _local_queues(resources: list[Any]) -> set[str]:
    return {
        f"{r.inputs['metadata']['namespace']}/{r.inputs['metadata']['name']}"
        for r in resources
        if r.type == f"{KUEUE}:LocalQueue"
    }


def test_a_gpudirect_team_queue_is_on_the_manager_in_the_teams_gpudirect_namespace(
    gpudirect: RunResult,
) -> None:
    manager = _on(gpudirect, _manager_cluster(gpudirect))
    for team in ("research", "platform"):
        # The namespace a team submits its GPUDirect jobs from, and its LocalQueue there.
        (namespace,) = [m for m in _namespaces(manager) if m["name"] == f"gpudirect-{team}"]
        assert namespace["labels"]["gke-gpu/gpudirect-team"] == team
        # The manager runs none of its Pods and has no GPUDirect admission policy: never privileged.
        assert namespace["labels"][ENFORCE] == "baseline"
        assert {f"{team}/gpu-h100", f"gpudirect-{team}/gpu-h100"} <= _local_queues(manager)
        (queue,) = [
            r.inputs
            for r in manager
            if r.type == f"{KUEUE}:ClusterQueue" and r.inputs["metadata"]["name"] == f"gpu-h100-{team}"
        ]
        (selector,) = queue["spec"]["namespaceSelector"]["matchExpressions"]
        assert selector["values"] == [team, f"gpudirect-{team}"]
    # The GPUDirect worker has the same LocalQueues (MultiKueue creates the job in the namespace it
    # was submitted from).
    assert {"gpudirect-research/gpu-h100", "gpudirect-platform/gpu-h100"} <= _local_queues(
        _on(gpudirect, "us-east-gke")
    )


def test_every_kueue_object_of_the_gpudirect_fleet_is_valid(gpudirect: RunResult) -> None:
    objects = [r.inputs for r in gpudirect.resources if r.type.startswith(KUEUE)]
    assert any(o["metadata"].get("namespace") == "gpudirect-research" for o in objects)
    for obj in objects:
        validate(obj)


def test_a_plain_fleet_has_no_gpudirect_namespace_on_the_manager() -> None:
    plain = render(fleet_config(fleet_raw()))
    manager = _on(plain, _manager_cluster(plain))
    assert not [m for m in _namespaces(manager) if m["name"].startswith("gpudirect-")]
    assert all(not q.startswith("gpudirect-") for q in _local_queues(manager))


def test_a_team_queue_on_a_dra_pool_is_refused_by_key_and_why() -> None:
    raw = fleet_raw()
    central = raw["fleet"]["workers"][1]
    central["cluster"]["minimumVersion"] = "1.34"
    central["gpuPools"].append(dict(DRA_L4_POOL))
    central["monitoring"] = {"dcgm": "none", "dashboard": False}
    central["batch"]["teams"][0]["pools"]["l4"] = {"gpus": 2}
    # The worker's own queue on its DRA pool is fine; the fleet's queue on it is not.
    assert "draGpus" not in errors(_with_bad_queue(raw, ok=True))
    message = errors(_with_bad_queue(raw, ok=False))
    assert (
        "gke-gpu:fleet.teams[0].queues[1].pool: 'l4' is a draGpus pool on worker(s) us-central; a fleet "
        "queue cannot use it: its jobs claim devices through DRA"
    ) in message
    assert message.count("draGpus pool") == 1
    # No follow-on: the refused queue's pool is not asked for a capacity guarantee too.
    assert "queuedProvisioning" not in message and "podsReadyTimeoutMinutes" not in message


def _with_bad_queue(raw: dict[str, Any], *, ok: bool) -> dict[str, Any]:
    import copy

    changed = copy.deepcopy(raw)
    if ok:
        # Something else wrong, so that errors() has a ConfigError to read.
        changed["fleet"]["teams"][1]["queues"][0]["workers"] = ["eu-west"]
    else:
        changed["fleet"]["teams"][0]["queues"].append({"pool": "l4"})
    return changed


def test_the_render_shows_where_a_team_submits_its_gpudirect_jobs(gpudirect: RunResult) -> None:
    rows = {row["team"]: row for row in gpudirect.outputs["fleet"]["teams"]}
    assert rows["research"]["localQueue"] == "research/gpu-h100"
    assert rows["research"]["gpudirectLocalQueue"] == "gpudirect-research/gpu-h100"
