"""Fleets drawn at random (1 to 4 workers reached through the fleet or by token, two teams, pools of
two kinds, queues naming workers or not, a readiness timeout or not; workers with what a
single-cluster stack takes: GPUDirect pools, `draGpus` pools, teams' training data, their own
monitoring): no traceback and no hang, what the stack rules accept the components accept, and no
credential shows in a render and no token Secret is declared."""

import json
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gke_gpu.stack.config import ConfigError, parse_settings
from gke_gpu.stack.program import check_components
from tests.conftest import render
from tests.test_fuzz import fuzz, no_hang
from tools.offline import MOCK_TOKEN_PREFIX

WORKER_NAMES = st.sampled_from(["us-east", "us-central", "us-west", "eu"])
REGIONS = st.sampled_from(["us-east4", "us-central1", "us-west1", "europe-west4"])
TEAMS = ["research", "platform"]


def rare(draw: st.DrawFn, odds: int) -> bool:
    """True about once in `odds + 1` draws (Hypothesis also tries the edges: a list, not an integer)."""
    return draw(st.sampled_from([False] * odds + [True]))


def mostly(draw: st.DrawFn, odds: int) -> bool:
    return not rare(draw, odds)


@st.composite
def pool(draw: st.DrawFn, region: str) -> dict[str, Any]:
    entry: dict[str, Any] = draw(
        st.sampled_from(
            [
                {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8},
                {"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 1},
            ]
        )
    )
    entry["maxNodes"] = draw(st.integers(1, 3))
    entry.update(
        draw(
            st.sampled_from(
                [
                    {},
                    {"flexStart": True, "queuedProvisioning": True},
                    {"queuedProvisioning": True},
                    {"spot": True},
                    {"flexStart": True},
                ]
            )
        )
    )
    if rare(draw, 3):
        # Now and then what a single-cluster stack takes: GPUDirect (TCPXO on A3 Mega, in one zone) or
        # GPUs through DRA (GKE installs no driver there).
        if entry["name"] == "h100":
            zone = "europe-west4-b" if region == "europe-west4" else f"{region}-a"  # where A3 Mega is
            entry.update(accelerator="nvidia-h100-mega-80gb", gpudirect=True, zones=[zone])
        else:
            entry.update(draGpus=True, driverVersion="INSTALLATION_DISABLED")
    return entry


@st.composite
def worker(draw: st.DrawFn) -> dict[str, Any]:
    region = draw(REGIONS)
    pools = draw(st.lists(pool(region), min_size=1, max_size=2, unique_by=lambda p: p["name"]))
    teams = []
    for team in draw(st.lists(st.sampled_from(TEAMS), max_size=2, unique=True)):
        shares = {
            p["name"]: {"gpus": draw(st.integers(0, p["maxNodes"] * p["gpusPerNode"] // 2))}
            for p in pools
            if mostly(draw, 4)  # mostly a share of every pool
        }
        if shares:
            entry: dict[str, Any] = {"name": team, "pools": shares}
            if rare(draw, 3):
                entry["data"] = [{"name": "training", "gcs": {"bucket": f"{team}-training-data"}}]
            teams.append(entry)
    drawn: dict[str, Any] = {
        "name": "",
        "region": region,
        "gpuPools": pools,
        "batch": {"kueue": mostly(draw, 7), "teams": teams},
    }
    if draw(st.booleans()):
        # A readiness timeout of its own; otherwise Kueue's default, which the fleet writes out.
        drawn["podsReadyTimeoutMinutes"] = draw(st.integers(1, 120))
    if rare(draw, 3):
        drawn["access"] = "token"
        if draw(st.booleans()):
            drawn["project"] = "other-123456"
    if any(p.get("draGpus") for p in pools):
        # DRA needs GKE 1.34, and GKE's managed DCGM needs GKE's drivers (mostly said, now and then not).
        drawn["cluster"] = {"minimumVersion": "1.34"}
        if mostly(draw, 9):
            drawn["monitoring"] = {"dcgm": "none", "dashboard": draw(st.booleans())}
    elif draw(st.booleans()):
        drawn["monitoring"] = {"dashboard": draw(st.booleans())}
    if rare(draw, 3):
        # A sample on a pool that takes nodes without a ProvisioningRequest (now and then, with none,
        # on a queued one), or an all-reduce test on a pool it can run on (2 nodes, not queued).
        unqueued = [p["name"] for p in pools if not p.get("queuedProvisioning")]
        testable = [n for n in unqueued if next(p for p in pools if p["name"] == n)["maxNodes"] >= 2]
        test = {"name": "nccl-allreduce", "pool": testable[0]} if testable else None
        sample = {"name": "nvidia-smi", "pool": (unqueued or [pools[0]["name"]])[0]}
        drawn["workloads"] = [test if test and draw(st.booleans()) else sample]
    return drawn


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    workers = draw(st.lists(worker(), min_size=1, max_size=4))
    names = draw(st.lists(WORKER_NAMES, min_size=len(workers), max_size=len(workers), unique=True))
    if len(names) > 1 and rare(draw, 9):
        names[-1] = names[0]  # now and then two workers with one name
    for i, (entry, name) in enumerate(zip(workers, names, strict=True)):
        entry["name"] = name
        # Ranges apart from the manager's (the defaults), as peering needs; now and then not.
        base = 28 if rare(draw, 19) else 40 + 20 * i
        entry["network"] = {
            "subnetCidr": f"10.{base}.0.0/20",
            "podsCidr": f"10.{base + 4}.0.0/14",
            "servicesCidr": f"10.{base + 8}.0.0/20",
        }
        if any(p.get("gpudirect") for p in entry["gpuPools"]):
            entry["network"]["gpudirectCidr"] = "192.168.0.0/16"
    teams = []
    for team in draw(st.lists(st.sampled_from(TEAMS), min_size=1, max_size=2, unique=True)):
        queues = []
        for pool_name in draw(st.lists(st.sampled_from(["h100", "l4"]), min_size=1, max_size=2, unique=True)):
            queue: dict[str, Any] = {"pool": pool_name}
            if draw(st.booleans()):
                listed = st.sampled_from([*names, "nowhere"]) if rare(draw, 4) else st.sampled_from(names)
                queue["workers"] = draw(st.lists(listed, min_size=1, max_size=3, unique=mostly(draw, 4)))
            queues.append(queue)
        entry = {"name": team, "queues": queues}
        if rare(draw, 3):
            # Members on the manager: users, now and then a group (which needs rbacSecurityGroup) or one
            # listed twice.
            people = ["user:a@example.com", "user:b@example.com", "group:ml@example.com"]
            entry["members"] = draw(st.lists(st.sampled_from(people), min_size=1, max_size=3))
        teams.append(entry)
    fleet: dict[str, Any] = {
        "workers": workers,
        "teams": teams,
        "dispatcher": draw(st.sampled_from(["allAtOnce", "incremental"])),
    }
    through_fleet = any(w.get("access") != "token" for w in workers)
    # Where a worker is reached through the fleet, now and then forgotten; elsewhere now and then given.
    if mostly(draw, 9) if through_fleet else rare(draw, 9):
        fleet["credentialsPluginImage"] = (
            "europe-west4-docker.pkg.dev/p-123456/plugins/gcp-auth-plugin:v0.0.1"
        )
    cluster = {"mode": "standard", "name": "fleet", "location": "europe-west4-a"}
    if draw(st.booleans()):
        cluster["rbacSecurityGroup"] = "gke-security-groups@example.com"
    return {"cluster": cluster, "fleet": fleet}


@given(fleets())
@fuzz(examples=60, deadline_ms=10_000)
def test_what_the_fleet_rules_accept_the_components_accept(raw: dict[str, Any]) -> None:
    with no_hang(10):
        try:
            settings, _ = parse_settings(raw, project="p-123456", region="europe-west4", stack="fuzz")
        except ConfigError as exc:
            refused = exc.problems
        else:
            refused = []
        if refused:
            event("refused by the stack rules")
            # Each problem keyed by the stack file (no traceback, nothing unkeyed).
            assert all(str(p).startswith("gke-gpu:") for p in refused), refused
            return
        event(f"accepted, {len(raw['fleet']['workers'])} worker(s)")
        drawn = [p for w in raw["fleet"]["workers"] for p in w["gpuPools"]]
        for feature in ("gpudirect", "draGpus"):
            if any(p.get(feature) for p in drawn):
                event(f"accepted with {feature}")
        if any(t.get("data") for w in raw["fleet"]["workers"] for t in w["batch"]["teams"]):
            event("accepted with training data")
        if any(w.get("workloads") for w in raw["fleet"]["workers"]):
            event("accepted with workloads")
        if any(w.get("access") == "token" for w in raw["fleet"]["workers"]):
            event("accepted with a token worker")
        if any(t.get("members") for t in raw["fleet"]["teams"]):
            event("accepted with members on the manager")
        assert settings.fleet is not None
        check_components(settings, component_rules=True)  # a ConfigError if a component refuses it


@given(fleets())
@fuzz(examples=4, deadline_ms=60_000)
def test_no_worker_credential_shows_in_a_render(raw: dict[str, Any]) -> None:
    try:
        parse_settings(raw, project="p-123456", region="europe-west4", stack="fuzz")
    except ConfigError:
        return
    config = {"gcp:project": "p-123456", "gcp:region": "europe-west4"} | {
        f"gke-gpu:{k}": v for k, v in raw.items()
    }
    result = render(config, preview=False)
    rendered = json.dumps([r.inputs for r in result.resources]) + json.dumps(result.outputs, default=str)
    assert MOCK_TOKEN_PREFIX not in rendered
    assert "kubernetes.io/service-account-token" not in rendered
