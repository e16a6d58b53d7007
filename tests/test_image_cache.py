"""Image preloading (serving issue, "Images, fast"): a GPU pool's `imageCache` (GpuNodePool's and
GpuCapacityLadder's `image_cache`) gives every node a secondary boot disk made from a disk image that
gke-disk-image-builder built, so containerd finds the image's layers on it instead of pulling them.
Image streaming, which GKE requires for it, stays on in every pool."""

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from gke_gpu import GpuCapacityLadder, GpuNodePool, ImageCacheAllowlist, InvalidArgsError
from gke_gpu.gpu.node_pool import REPLACE_ON_CHANGE
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    config_error,
    pool_args,
    render,
    stack_config,
)
from tests.kubernetes_schemas import SCHEMAS, validate
from tools.offline import RunResult, run_program
from tools.plan import diff, format_tree, to_document

VLLM = "projects/img-project/global/images/vllm-openai-v0-33-0"
OTHER = "projects/img-project/global/images/vllm-openai-v0-34-0"
CACHED = {**L4_POOL, "imageCache": {"diskImage": VLLM}}
NODE_POOL = "gcp:container/nodePool:NodePool"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
ALLOWLIST = "kubernetes:node.gke.io/v1:GCPResourceAllowlist"
ZONAL = {**STANDARD_CLUSTER, "location": "us-central1-a"}
LADDER = {
    "name": "h100",
    "accelerator": "nvidia-h100-80gb",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "capacityLadder": ["onDemand", "spot"],
    "imageCache": {"diskImage": VLLM},
}
ARGS = pool_args(cluster_name="c")
# Git blob id of the vendored GCPResourceAllowlist schema (see tests/schemas/SOURCES.md).
ALLOWLIST_SCHEMA = "crds-catalog/node.gke.io/gcpresourceallowlist_v1.json"
ALLOWLIST_SCHEMA_BLOB = "b19e195e52c879bbac933c6af8c314429c183a3a"


def standard(*pools: dict) -> RunResult:
    return render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=list(pools)))


def node_config(result: RunResult, pool: str = "l4") -> dict:
    return result.one(NODE_POOL, f"gpu-{pool}-pool").inputs["nodeConfig"]


def test_a_cached_pool_attaches_the_disk_image_as_a_container_image_cache() -> None:
    config = node_config(standard(CACHED))
    assert config["secondaryBootDisks"] == [{"diskImage": VLLM, "mode": "CONTAINER_IMAGE_CACHE"}]
    assert config["gcfsConfig"] == {"enabled": True}
    assert config["imageType"] == "COS_CONTAINERD"


def test_without_an_image_cache_no_secondary_boot_disk_is_declared() -> None:
    config = node_config(standard(L4_POOL))
    assert "secondaryBootDisks" not in config
    assert config["gcfsConfig"] == {"enabled": True}


@pytest.mark.parametrize(
    "pool",
    [
        L4_POOL,
        CACHED,
        {**CACHED, "spot": True},
        {**CACHED, "flexStart": True},
        {**CACHED, "queuedProvisioning": True},
        {**CACHED, "accelerator": "nvidia-tesla-a100", "migPartitionSize": "1g.5gb"},
        {**CACHED, "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 4}},
    ],
    ids=["plain", "cached", "spot", "flex-start", "queued", "mig", "time-sharing"],
)
def test_image_streaming_is_on_in_every_pool_whatever_else_it_sets(pool: dict) -> None:
    # GKE requires image streaming for a secondary boot disk: no pool setting may turn it off.
    assert node_config(standard(pool))["gcfsConfig"] == {"enabled": True}


@pytest.mark.parametrize("golden", sorted((Path(__file__).parent / "golden").glob("*.json")))
def test_every_gpu_node_pool_of_the_example_stacks_streams_images(golden: Path) -> None:
    document = json.loads(golden.read_text())
    pools = [r for r in document["resources"] if r["type"] == NODE_POOL and r["name"].startswith("gpu-")]
    assert all(r["inputs"]["nodeConfig"]["gcfsConfig"] == {"enabled": True} for r in pools)


def test_changing_or_adding_the_disk_image_replaces_the_pool() -> None:
    assert "nodeConfig.secondaryBootDisks" in REPLACE_ON_CHANGE
    plain, cached = to_document(standard(L4_POOL)), to_document(standard(CACHED))
    newer = to_document(standard({**L4_POOL, "imageCache": {"diskImage": OTHER}}))
    for old, new in ((plain, cached), (cached, newer), (cached, plain)):
        (change,) = [d for d in diff(old, new) if d.type == NODE_POOL]
        assert change.status == "replace"
        assert all(forces for path, _, _, forces in change.changes if "secondaryBootDisks" in path)


def test_the_render_shows_the_image_cache_and_the_version_it_needs() -> None:
    result = standard(CACHED)
    assert f"imageCache={VLLM}" in format_tree(to_document(result))
    (pool,) = result.outputs["gpuPools"]
    assert pool["imageCache"] == {"diskImage": VLLM}
    assert any(
        "gke-gpu:gpuPools[0]: imageCache needs GKE 1.30.1-gke.1329000 or later" in w for w in result.warnings
    )
    assert "imageCache" not in standard(L4_POOL).outputs["gpuPools"][0]


@pytest.mark.parametrize(
    ("cache", "expected"),
    [
        (
            {"diskImage": "global/images/vllm"},
            "gke-gpu:gpuPools[0].imageCache.diskImage: 'global/images/vllm' is not allowed; expected a "
            "Compute Engine image: projects/<project>/global/images/<image name>",
        ),
        (
            {"diskImage": "projects/img-project/global/images/family/vllm"},
            "gke-gpu:gpuPools[0].imageCache.diskImage: 'projects/img-project/global/images/family/vllm' "
            "is not allowed",
        ),
        (
            {"diskImage": "projects/img-project/global/images/VLLM"},
            "gke-gpu:gpuPools[0].imageCache.diskImage: 'projects/img-project/global/images/VLLM' is not "
            "allowed",
        ),
        ({}, "gke-gpu:gpuPools[0].imageCache.diskImage: required"),
        (
            {"diskImage": VLLM, "mode": "DATA"},
            "gke-gpu:gpuPools[0].imageCache.mode: unknown key; allowed keys here: diskImage",
        ),
        (VLLM, "gke-gpu:gpuPools[0].imageCache: 'projects/img-project/global/images/vllm-openai-v0-"),
    ],
    ids=["no-project", "family", "uppercase", "missing", "unknown-key", "not-a-mapping"],
)
def test_a_bad_image_cache_is_refused_by_key(cache: object, expected: str) -> None:
    assert expected in config_error(
        {"cluster": STANDARD_CLUSTER, "gpuPools": [{**L4_POOL, "imageCache": cache}]}
    )


def test_every_bad_pool_is_reported_in_one_run_without_follow_on_problems() -> None:
    message = config_error(
        {
            "cluster": STANDARD_CLUSTER,
            "gpuPools": [
                {**L4_POOL, "imageCache": {"diskImage": "vllm"}},
                {**L4_POOL, "name": "spare", "imageCache": {"diskImage": VLLM}, "minNodes": 3},
            ],
        }
    )
    assert "2 problem(s)" in message
    assert "gke-gpu:gpuPools[0].imageCache.diskImage: 'vllm' is not allowed" in message
    assert "gke-gpu:gpuPools[1].minNodes: 3 is greater than maxNodes 2" in message


def test_an_autopilot_profile_refuses_an_image_cache_with_the_reason() -> None:
    message = config_error(
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4", "imageCache": {"diskImage": VLLM}}],
        }
    )
    assert (
        "gke-gpu:gpuPools[0].imageCache: not allowed on Autopilot (on Autopilot, a workload asks for a "
        "preloaded disk itself" in message
    )


@pytest.fixture(scope="module")
def ladder() -> RunResult:
    second = {**LADDER, "name": "h100-spot", "capacityLadder": ["spot"], "imageCache": {"diskImage": OTHER}}
    third = {**LADDER, "name": "h100-again", "capacityLadder": ["onDemand"]}  # the same image again
    return render(stack_config(cluster=ZONAL, gpuPools=[LADDER, second, third]))


def test_a_ladder_preloads_the_image_on_every_rung_with_image_streaming(ladder: RunResult) -> None:
    compute_class = ladder.one(COMPUTE_CLASS, "gpu-h100-class").inputs
    spec = compute_class["spec"]
    assert len(spec["priorities"]) == 2
    for rule in spec["priorities"]:
        assert rule["storage"]["secondaryBootDisks"] == [
            {
                "diskImageName": "vllm-openai-v0-33-0",
                "project": "img-project",
                "mode": "CONTAINER_IMAGE_CACHE",
            }
        ]
    assert spec["nodePoolConfig"]["imageStreaming"] == {"enabled": True}
    validate(compute_class)


def test_one_allowlist_names_every_ladder_image_once(ladder: RunResult) -> None:
    (allowlist,) = ladder.of_type(ALLOWLIST)
    assert allowlist.inputs["metadata"]["name"] == "gke-secondary-boot-disk-allowlist"
    assert allowlist.inputs["spec"] == {"allowedResourcePatterns": [VLLM, OTHER]}
    assert "ImageCacheAllowlist" in allowlist.urn
    validate(allowlist.inputs)


def test_a_ladder_without_an_image_cache_is_unchanged() -> None:
    result = render(
        stack_config(cluster=ZONAL, gpuPools=[{k: v for k, v in LADDER.items() if k != "imageCache"}])
    )
    spec = result.one(COMPUTE_CLASS).inputs["spec"]
    assert all("secondaryBootDisks" not in rule["storage"] for rule in spec["priorities"])
    assert "imageStreaming" not in spec["nodePoolConfig"]
    assert result.of_type(ALLOWLIST) == []


def test_node_pools_need_no_allowlist() -> None:
    assert standard(CACHED).of_type(ALLOWLIST) == []


def test_the_node_pool_component_takes_an_image_cache_and_refuses_a_bad_one() -> None:
    result = run_program(
        {}, program=lambda: GpuNodePool("train", {**ARGS, "image_cache": {"disk_image": VLLM}})
    )
    assert result.error is None, result.error
    assert result.one(NODE_POOL).inputs["nodeConfig"]["secondaryBootDisks"] == [
        {"diskImage": VLLM, "mode": "CONTAINER_IMAGE_CACHE"}
    ]
    bad = {**ARGS, "image_cache": {"disk_image": "projects/P/global/images/x", "mode": "DATA"}}
    result = run_program({}, program=lambda: GpuNodePool("train", bad))
    assert isinstance(result.error, InvalidArgsError)
    assert result.error.problems == [
        "image_cache.disk_image: 'projects/P/global/images/x' is not allowed; expected a Compute Engine "
        "image: projects/<project>/global/images/<image name>",
        "image_cache.mode: unknown key; allowed keys here: disk_image",
    ]
    assert result.resources == []


def test_the_ladder_component_takes_an_image_cache() -> None:
    args = {
        "accelerator": "nvidia-h100-80gb",
        "capacity_ladder": ["onDemand"],
        "max_nodes": 2,
        "location": "us-central1-a",
        "project": "p-123456",
        "image_cache": {"disk_image": VLLM},
    }
    result = run_program({}, program=lambda: GpuCapacityLadder("h100", args))
    assert result.error is None, result.error
    (rule,) = result.one(COMPUTE_CLASS).inputs["spec"]["priorities"]
    assert rule["storage"]["secondaryBootDisks"][0]["diskImageName"] == "vllm-openai-v0-33-0"


@pytest.mark.parametrize(
    ("images", "expected"),
    [
        ([], "disk_images: [] is not allowed"),
        ([VLLM, VLLM], f"disk_images: lists {VLLM!r} 2 times"),
        (["global/images/x"], "disk_images[0]: 'global/images/x' is not allowed; expected a Compute Engine"),
    ],
)
def test_the_allowlist_component_refuses_bad_images_by_arg(images: list, expected: str) -> None:
    result = run_program({}, program=lambda: ImageCacheAllowlist("cache", {"disk_images": images}))
    assert isinstance(result.error, InvalidArgsError)
    assert any(p.startswith(expected) for p in result.error.problems), result.error.problems
    assert result.resources == []


def test_the_vendored_allowlist_schema_is_the_published_file() -> None:
    data = (SCHEMAS / ALLOWLIST_SCHEMA).read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert blob == ALLOWLIST_SCHEMA_BLOB, "re-vendor verbatim and update SOURCES.md and the blob id"


def test_the_allowlist_schemas_refuse_what_gke_would_not_take() -> None:
    good = {
        "apiVersion": "node.gke.io/v1",
        "kind": "GCPResourceAllowlist",
        "metadata": {"name": "gke-secondary-boot-disk-allowlist"},
        "spec": {"allowedResourcePatterns": [VLLM]},
    }
    validate(good)
    for bad in (
        {**good, "spec": {"allowedResourcePatterns": []}},
        {**good, "spec": {"patterns": [VLLM]}},
        {**good, "metadata": {"name": "x", "namespace": "default"}},
        {**good, "specs": {}},
    ):
        with pytest.raises(AssertionError):
            validate(bad)


def test_the_render_says_a_ladder_needs_the_allowlist(ladder: RunResult) -> None:
    assert any(
        "gke-gpu:gpuPools[0].imageCache: GKE creates the ladder's node pools itself" in w
        and "ImageCacheAllowlist" in w
        for w in ladder.warnings
    )


def test_the_serving_docs_example_renders_with_the_key_uncommented() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "serving.md").read_text(encoding="utf-8")
    section = text[text.index("## Images, fast") :]
    block = re.search(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None
    uncommented = block.group(1).replace("# imageCache", "imageCache").replace("#   diskImage", "  diskImage")
    pools = yaml.safe_load(uncommented.replace("<your-project>", "img-project"))["gke-gpu:gpuPools"]
    config = node_config(standard(*pools))
    assert config["secondaryBootDisks"] == [
        {
            "diskImage": "projects/img-project/global/images/vllm-openai-v0-33-0",
            "mode": "CONTAINER_IMAGE_CACHE",
        }
    ]


def test_preloading_stacks_pass_the_policy_pack(ladder: RunResult) -> None:
    from tools import check_policies

    for result in (standard(CACHED), ladder):
        document = to_document(result)
        assert any(r["type"] in (NODE_POOL, ALLOWLIST) for r in document["resources"])  # not vacuous
        assert [str(v) for v in check_policies.check_document(document, notes=[])] == []
