"""Teams sharing the GPU pools through Kueue (issue 17): a cohort per pool, a ClusterQueue per team with
its share, borrowing and reclaiming; topology-aware placement; and the stack file's bad input."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gke_gpu.core.common import ConfigError
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.stack.config import parse_settings
from gke_gpu.workloads.batch_queues import GpuBatchQueues
from gke_gpu.workloads.batch_teams import Quota
from tests.conftest import L4_POOL, MEGA_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tests.conftest import ZONAL_CLUSTER as ZONAL
from tests.kubernetes_schemas import validate
from tools.offline import RunResult

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
# Kueue places by topology only nodes that exist or that queued provisioning obtains first.
MEGA = {**MEGA_POOL, "queuedProvisioning": True}
TEAMS = [
    {"name": "research", "pools": {"train": {"gpus": 8}}},
    {"name": "platform", "namespace": "platform-jobs", "pools": {"train": {"gpus": 4, "borrow": 4}}},
]


def two_teams(**batch: object) -> dict:
    return stack_config(
        cluster=ZONAL,
        gpuPools=[MEGA],
        batch={"kueue": True, "teams": TEAMS, **batch},
        workloads=[{"name": "nccl-allreduce", "pool": "train", "nodes": 2}],
    )


@pytest.fixture(scope="module")
def shared() -> RunResult:
    return render(two_teams())


def spec(result: RunResult, kind: str, name: str) -> dict:
    return result.one(f"{KUEUE}:{kind}", name).inputs["spec"]


def quota(cluster_queue: dict) -> dict:
    (group,) = cluster_queue["resourceGroups"]
    (flavor,) = group["flavors"]
    return {r["name"]: (r["nominalQuota"], r.get("borrowingLimit")) for r in flavor["resources"]}


def test_each_team_gets_a_cluster_queue_with_its_share_in_the_pools_cohort(shared: RunResult) -> None:
    research = spec(shared, "ClusterQueue", "batch-train/research-cluster-queue")
    platform = spec(shared, "ClusterQueue", "batch-train/platform-cluster-queue")
    pool = spec(shared, "ClusterQueue", "batch-train-cluster-queue")
    assert research["cohortName"] == platform["cohortName"] == pool["cohortName"] == "gpu-train"
    # research: 8 of 16 GPUs, so half the pool's 416 vCPUs, 3,744 GiB and 5,584 GiB of ephemeral storage
    # (2 nodes x 16 Local SSDs x 349 GiB: a3-megagpu-8g puts ephemeral storage on them); no limit
    # on borrowing. platform: 4 of 16 (a quarter), borrowing at most 4 GPUs (and a quarter of the rest).
    assert quota(research) == {
        "cpu": (208, None),
        "memory": ("1872Gi", None),
        "ephemeral-storage": ("5584Gi", None),
        "nvidia.com/gpu": (8, None),
    }
    assert quota(platform) == {
        "cpu": (104, 104),
        "memory": ("936Gi", "936Gi"),
        "ephemeral-storage": ("2792Gi", "2792Gi"),
        "nvidia.com/gpu": (4, 4),
    }
    # The pool's own queue keeps what no team holds: 16 - 8 - 4 = 4 GPUs (the all-reduce queues here).
    assert quota(pool)["nvidia.com/gpu"] == (4, None)
    assert quota(pool)["cpu"] == (416 - 208 - 104, None)


def test_a_team_reclaims_its_share_by_preempting_borrowers(shared: RunResult) -> None:
    for name in ("batch-train/research-cluster-queue", "batch-train-cluster-queue"):
        assert spec(shared, "ClusterQueue", name)["preemption"] == {
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "LowerPriority",
        }


def test_a_teams_queue_admits_only_its_namespace(shared: RunResult) -> None:
    platform = spec(shared, "ClusterQueue", "batch-train/platform-cluster-queue")
    assert platform["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": ["platform-jobs", "gpudirect-platform"],
            }
        ]
    }
    # The pool's own queue, shared by the teams' cohort, admits only the all-reduce's namespace: no team
    # can point a LocalQueue at it to borrow past its limit.
    pool = spec(shared, "ClusterQueue", "batch-train-cluster-queue")
    assert pool["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["gpu-nccl-train"]}
        ]
    }
    local = shared.one(f"{KUEUE}:LocalQueue", "batch-train/platform-local-queue").inputs
    assert local["metadata"]["namespace"] == "platform-jobs"
    assert local["metadata"]["name"] == "gpu-train"
    assert local["spec"] == {"clusterQueue": "gpu-train-platform"}


def test_team_namespaces_are_created_with_pod_security_and_a_network_policy(shared: RunResult) -> None:
    namespace = shared.one("kubernetes:core/v1:Namespace", "batch-team-research-namespace").inputs
    labels = namespace["metadata"]["labels"]
    assert namespace["metadata"]["name"] == "research"
    assert labels["gke-gpu/team"] == "research"
    # 'baseline' whatever the pools: GPUDirect's Pods go to the team's GPUDirect namespace.
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    policy = shared.one(
        "kubernetes:networking.k8s.io/v1:NetworkPolicy", "batch-team-research-network-policy"
    ).inputs
    assert policy["metadata"]["namespace"] == "research"
    assert policy["spec"] == {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {}}]}],
    }
    # No default team when teams are listed.
    assert not [
        r for r in shared.of_type("kubernetes:core/v1:Namespace") if r.name.endswith("default-namespace")
    ]


def test_an_existing_team_namespace_is_not_created() -> None:
    teams = [{"name": "research", "createNamespace": False, "pools": {"l4": {"gpus": 1}}}]
    result = render(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], batch={"kueue": True, "teams": teams})
    )
    assert sorted(r.name for r in result.of_type("kubernetes:core/v1:Namespace")) == [
        "batch-jobset-namespace",
        "batch-kueue-namespace",
    ]
    assert result.one(f"{KUEUE}:LocalQueue", "batch-l4/research-local-queue").inputs["metadata"][
        "namespace"
    ] == ("research")


def test_every_object_is_valid_against_its_schema(shared: RunResult) -> None:
    objects = [
        r.inputs
        for r in shared.resources
        if r.type.startswith(KUEUE)
        or r.type in {"kubernetes:core/v1:Namespace", "kubernetes:networking.k8s.io/v1:NetworkPolicy"}
    ]
    kinds = sorted(o["kind"] for o in objects)
    assert kinds.count("ClusterQueue") == 3 and kinds.count("Topology") == 1
    for obj in objects:
        validate(obj)


def test_the_output_shows_each_teams_queues_quota_and_borrowing(shared: RunResult) -> None:
    (queue,) = shared.outputs["batchQueues"]
    assert queue["cohort"] == "gpu-train"
    assert queue["quota"]["nvidia.com/gpu"] == 4
    assert [
        (t["team"], t["localQueue"], t["clusterQueue"], t["quota"]["nvidia.com/gpu"], t["mayBorrowGpus"])
        for t in queue["teams"]
    ] == [
        ("research", "research/gpu-train", "gpu-train-research", 8, 8),
        ("platform", "platform-jobs/gpu-train", "gpu-train-platform", 4, 4),
    ]


def test_gpudirect_pools_place_pods_by_topology_by_default(shared: RunResult) -> None:
    topology = spec(shared, "Topology", "batch-topology")
    assert [level["nodeLabel"] for level in topology["levels"]] == [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
        "kubernetes.io/hostname",
    ]
    assert spec(shared, "ResourceFlavor", "batch-train-flavor")["topologyName"] == "gke-default"
    jobset = shared.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet").inputs
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert (
        pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] == "kubernetes.io/hostname"
    )


def test_an_empty_topology_list_turns_placement_off() -> None:
    result = render(two_teams(topology=[]))
    assert result.of_type(f"{KUEUE}:Topology") == []
    assert "topologyName" not in spec(result, "ResourceFlavor", "batch-train-flavor")
    jobset = result.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet").inputs
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert "kueue.x-k8s.io/podset-preferred-topology" not in pod["metadata"]["annotations"]


def test_a_pool_without_gpudirect_has_no_topology_by_default() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL], batch={"kueue": True}))
    assert result.of_type(f"{KUEUE}:Topology") == []


@pytest.mark.parametrize(
    ("batch", "pools", "expected"),
    [
        (
            {"teams": [{"name": "a", "pools": {"l40s": {"gpus": 1}}}]},
            [L4_POOL],
            "gke-gpu:batch.teams[0].pools.l40s: 'l40s' is not a GPU pool of this stack; pools: l4",
        ),
        (
            {
                "teams": [
                    {"name": "a", "pools": {"train": {"gpus": 12}}},
                    {"name": "b", "pools": {"train": {"gpus": 8}}},
                ]
            },
            [MEGA],
            "gke-gpu:batch.teams: the teams' shares of pool train add up to 20 GPUs (a 12 + b 8), more than "
            "its 16 (maxNodes 2 x 8 GPUs); lower a share or raise the pool's maxNodes",
        ),
        (
            {"teams": [{"name": "a", "pools": {"train": {"gpus": 10, "borrow": 8}}}]},
            [MEGA],
            "gke-gpu:batch.teams[0].pools.train.borrow: 8 is more than pool train has beyond the team's "
            "share (16 - 10 = 6 GPUs); at most 6",
        ),
        (
            {
                "teams": [
                    {"name": "a", "namespace": "ml", "pools": {"l4": {"gpus": 1}}},
                    {"name": "b", "namespace": "ml", "pools": {"l4": {"gpus": 1}}},
                ]
            },
            [L4_POOL],
            "gke-gpu:batch.teams[1].namespace: 'ml' is also teams[0]'s namespace",
        ),
        (
            {"teams": [{"name": "a", "namespace": "ML_Team", "pools": {"l4": {"gpus": 1}}}]},
            [L4_POOL],
            "gke-gpu:batch.teams[0].namespace: 'ML_Team' is not allowed: expected a Kubernetes namespace "
            "name",
        ),
        (
            {"teams": [{"name": "a", "namespace": "kube-system", "pools": {"l4": {"gpus": 1}}}]},
            [L4_POOL],
            "gke-gpu:batch.teams[0].namespace: 'kube-system' is reserved",
        ),
        (
            {"teams": [{"name": "a", "namespace": "serve-chat", "pools": {"l4": {"gpus": 1}}}]},
            [L4_POOL],
            "gke-gpu:batch.teams[0].namespace: 'serve-chat' is reserved",
        ),
        (
            {"teams": [{"name": "a", "namespace": "gmp-team", "pools": {"l4": {"gpus": 1}}}]},
            [L4_POOL],
            "gke-gpu:batch.teams[0].namespace: 'gmp-team' is reserved",
        ),
        (
            {
                "teams": [
                    {"name": "a", "pools": {"l4": {"gpus": 1}}},
                    {"name": "a", "namespace": "x", "pools": {"l4": {"gpus": 1}}},
                ]
            },
            [L4_POOL],
            "gke-gpu:batch.teams[1].name: 'a' is not allowed: it is also teams[0]'s name; each team needs a "
            "name of its own (such as a-2)",
        ),
        (
            {"teams": [{"name": "a-very-long-team-name", "pools": {"l4": {"gpus": 1}}}]},
            [L4_POOL],
            "gke-gpu:batch.teams[0].name: 'a-very-long-team-name' is too long; at most 18 characters",
        ),
        (
            {"teams": [{"name": "a", "pools": {}}]},
            [L4_POOL],
            "gke-gpu:batch.teams[0].pools",
        ),
        (
            {"topology": ["l4"]},
            [L4_POOL],
            "gke-gpu:batch.topology[0]: 'l4': its nodes (g2-standard-8) carry no GKE topology labels",
        ),
        (
            {"topology": ["train"]},
            [{**MEGA, "gpudirect": False, "queuedProvisioning": False, "spot": True}],
            "gke-gpu:batch.topology[0]: 'train': Spot nodes carry GKE's topology labels only with compact "
            "placement",
        ),
        (
            {"topology": ["train"]},
            [{**MEGA, "queuedProvisioning": False}],
            "gke-gpu:batch.topology[0]: 'train': Kueue places jobs by topology only on nodes that exist, or "
            "that queued provisioning obtains first; the pool scales from 0 to 2 nodes without it",
        ),
        (
            {"teams": [{"name": "a", "pools": {"train": {"gpus": 0, "borrow": 0}}}]},
            [MEGA],
            "gke-gpu:batch.teams[0].pools.train.borrow: 0 with a share of 0 GPUs: team a could never run",
        ),
        (
            {"topology": ["nope"]},
            [L4_POOL],
            "gke-gpu:batch.topology[0]: 'nope' is not a GPU pool of this stack",
        ),
    ],
)
def test_bad_teams_and_topology_are_refused_with_the_key(batch: dict, pools: list, expected: str) -> None:
    cluster = ZONAL if pools[0] is not L4_POOL else STANDARD_CLUSTER
    message = config_error({"cluster": cluster, "gpuPools": pools, "batch": {"kueue": True, **batch}})
    assert expected in message, message


def test_teams_and_topology_need_kueue() -> None:
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [L4_POOL],
            "batch": {"teams": [{"name": "a", "pools": {"l4": {"gpus": 1}}}], "topology": []},
        }
    )
    assert "gke-gpu:batch.teams: only allowed with kueue: true" in message
    assert "gke-gpu:batch.topology: only allowed with kueue: true" in message


def test_two_team_queues_may_not_share_a_name() -> None:
    pools = [L4_POOL, {**L4_POOL, "name": "l4-b"}]
    teams = [
        {"name": "b-c", "namespace": "x", "pools": {"l4": {"gpus": 1}}},
        {"name": "c", "namespace": "y", "pools": {"l4-b": {"gpus": 1}}},
    ]
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": pools, "batch": {"kueue": True, "teams": teams}}
    )
    assert (
        "gke-gpu:batch.teams[1].pools.l4-b: team c's ClusterQueue gpu-l4-b-c would be team b-c's queue of "
        "pool l4" in message
    )


def test_a_team_queue_may_not_take_another_pools_queue_name() -> None:
    pools = [L4_POOL, {**L4_POOL, "name": "l4-ml"}]
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": pools,
            "batch": {"kueue": True, "teams": [{"name": "ml", "pools": {"l4": {"gpus": 1}}}]},
        }
    )
    assert (
        "gke-gpu:batch.teams[0].pools.l4: team ml's ClusterQueue gpu-l4-ml would be the queue of pool l4-ml"
        in message
    )


QUEUE = {
    "name": "l4",
    "node_labels": {"cloud.google.com/gke-nodepool": "l4"},
    "tolerations": [],
    "gpus": 4,
    "cpus": 32,
    "memory_gib": 128,
    "ephemeral_storage_gib": 400,
}


def test_the_component_refuses_shares_for_unknown_teams_and_over_the_pool() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        GpuBatchQueues.check_args(
            "batch",
            {
                "queues": [{**QUEUE, "shares": [{"team": "ghost", "gpus": 1}, {"team": "ml", "gpus": 5}]}],
                "teams": [{"name": "ml", "namespace": "ml"}],
            },
        )
    text = str(refused.value)
    assert "queues[0].shares[0].team: 'ghost' is not a team; teams: ml" in text
    assert (
        "queues: the teams' shares of pool l4 add up to 6 GPUs (ghost 1 + ml 5), more than its 4 (its gpus)"
        in text
    )


@given(
    whole=st.builds(
        Quota,
        gpus=st.integers(1, 1000),
        cpus=st.integers(1, 100_000),
        memory_gib=st.integers(1, 1_000_000),
        ephemeral_storage_gib=st.integers(1, 1_000_000),
    ),
    data=st.data(),
)
def test_team_parts_never_add_up_to_more_than_the_pool(whole: Quota, data: st.DataObject) -> None:
    shares = data.draw(
        st.lists(st.integers(0, whole.gpus), max_size=8).filter(lambda s: sum(s) <= whole.gpus)
    )
    parts = [whole.part(g) for g in shares]
    left = whole.minus(parts)
    assert left.gpus == whole.gpus - sum(shares)
    assert min(left.cpus, left.memory_gib, left.ephemeral_storage_gib) >= 0


DOCS = Path(__file__).resolve().parent.parent / "docs" / "teams.md"


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_docs_batch_example_renders_with_the_quotas_the_docs_show() -> None:
    example = yaml.safe_load(_yaml_blocks()[0])["gke-gpu:batch"]
    result = render(stack_config(cluster=ZONAL, gpuPools=[MEGA], batch=example))
    (queue,) = result.outputs["batchQueues"]
    assert queue["quota"] == {
        "nvidia.com/gpu": 4,
        "cpu": 104,
        "memory": "936Gi",
        "ephemeral-storage": "2792Gi",
    }
    assert {t["clusterQueue"]: t["quota"]["cpu"] for t in queue["teams"]} == {
        "gpu-train-research": 208,
        "gpu-train-platform": 104,
    }


def test_the_docs_job_and_jobset_are_valid_manifests() -> None:
    manifests = [m for m in map(yaml.safe_load, _yaml_blocks()) if isinstance(m, dict) and "apiVersion" in m]
    # The submitting example's Job and JobSet, and the training-data Job.
    assert sorted(m["kind"] for m in manifests) == ["Job", "Job", "JobSet"]
    for manifest in manifests:
        named = {**manifest, "metadata": {**manifest["metadata"], "name": "example"}}
        validate(named)
        assert manifest["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "gpu-train"}


NAMES = st.sampled_from(["research", "platform", "a", "", "Bad_Name", "kube-system", "x" * 30, "train", "l4"])
SHARE = st.fixed_dictionaries(
    {"gpus": st.one_of(st.integers(-2, 40), st.just("8"), st.none())},
    optional={"borrow": st.one_of(st.integers(-1, 40), st.booleans()), "extra": st.just(1)},
)
TEAM = st.fixed_dictionaries(
    {
        "name": NAMES,
        "pools": st.dictionaries(st.sampled_from(["train", "l4", "nope", ""]), SHARE, max_size=3),
    },
    optional={"namespace": NAMES, "createNamespace": st.one_of(st.booleans(), st.just("no"))},
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    teams=st.one_of(st.lists(TEAM, max_size=4), st.just("teams"), st.none()),
    topology=st.one_of(st.none(), st.lists(st.sampled_from(["train", "l4", "nope", ""]), max_size=3)),
    kueue=st.booleans(),
)
def test_any_batch_section_is_either_accepted_or_refused_by_key(
    teams: Any, topology: Any, kueue: bool
) -> None:
    batch: dict[str, Any] = {"kueue": kueue}
    if teams is not None:
        batch["teams"] = teams
    if topology is not None:
        batch["topology"] = topology
    raw = {"cluster": ZONAL, "gpuPools": [MEGA, {**L4_POOL, "zones": ["us-central1-a"]}], "batch": batch}
    problems: list[str] = []
    try:
        parse_settings(raw, project="test-project", region="us-central1", stack="test")
    except ConfigError as exc:
        problems = str(exc).splitlines()[1:]
    # Only a traceback-free refusal, every problem under the batch section (the rest is valid).
    assert all(line.startswith("  - gke-gpu:batch") for line in problems), problems
