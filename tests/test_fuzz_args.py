"""No traceback and no hang at a component's boundary either: any args dict a program (or the
provider, with its floats and decoded enums) can hand GpuNodePool or GpuComputeClass gives either a
resolved pool or one InvalidArgsError whose every line names an arg, and whose details carry each
line's own path and reason."""

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gke_gpu.core.common import Problem
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpu.compute_class import validate_compute_class_args
from gke_gpu.gpu.node_pool import validate_gpu_node_pool_args
from gke_gpu.gpu.pool_args import GpuSharingStrategy
from tests.test_fuzz import fuzz, no_hang

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=300),
    st.lists(st.text(max_size=20), max_size=4),
    st.dictionaries(st.text(max_size=10), st.integers(), max_size=3),
)
PLAUSIBLE = {
    "project": st.sampled_from(["p-123456", "my-project-1", "X", ""]),
    "location": st.sampled_from(
        ["us-central1", "us-central1-a", "europe-west4", "mars-north9", "us-central1-z"]
    ),
    "cluster_name": st.sampled_from(["c", "gpu-cluster", "x" * 60]),
    "accelerator": st.sampled_from(
        ["nvidia-l4", "nvidia-h100-80gb", "nvidia-tesla-a100", "nvidia-gb200", "nvidia-l5"]
    ),
    "gpus_per_node": st.one_of(st.integers(-1, 17), st.sampled_from([1.0, 2.0, 2.5])),
    "max_nodes": st.one_of(st.integers(-1, 1001), st.just(2.0)),
    "min_nodes": st.integers(-1, 5),
    "machine_type": st.sampled_from(["g2-standard-8", "a3-highgpu-8g", "n1-standard-4", "e2-small", "BAD"]),
    "zones": st.lists(
        st.sampled_from(["us-central1-a", "us-central1-f", "europe-west4-a", "bad"]), max_size=4
    ),
    "spot": st.booleans(),
    "driver_version": st.sampled_from(["DEFAULT", "LATEST", "INSTALLATION_DISABLED", "NEWEST"]),
    "sharing": st.fixed_dictionaries(
        {
            "strategy": st.sampled_from([*GpuSharingStrategy, "SLICED"]),
            "max_clients_per_gpu": st.integers(0, 60),
        }
    ),
    "mig_partition_size": st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb", "big"]),
    "reservation": st.fixed_dictionaries(
        {"type": st.sampled_from(["NONE", "ANY", "SPECIFIC", "SOME"])},
        optional={"name": st.sampled_from(["r1", "projects/p-123456/reservations/r1", "Bad Name"])},
    ),
    "queued_provisioning": st.booleans(),
    "flex_start": st.booleans(),
    "max_run_duration": st.sampled_from(["90m", "7d", "8d", "1w", "0s"]),
    "compact_placement": st.booleans(),
    "gpudirect": st.booleans(),
    "additional_node_networks": st.lists(
        st.fixed_dictionaries(
            {"network": st.sampled_from(["v1", "Bad VPC"])}, optional={"subnetwork": st.just("s1")}
        ),
        max_size=9,
    ),
    "local_ssd_count": st.integers(-1, 33),
    "disk_size_gb": st.integers(0, 70000),
    "disk_type": st.sampled_from(["pd-balanced", "hyperdisk-balanced", "pd-ssd", "floppy"]),
    "image_cache": st.fixed_dictionaries(
        {
            "disk_image": st.sampled_from(
                [
                    "projects/p-123456/global/images/vllm",
                    "global/images/vllm",
                    "projects/P/global/images/x",
                    "projects/p-123456/global/images/" + "x" * 70,
                ]
            )
        },
        optional={"mode": st.just("CONTAINER_IMAGE_CACHE")},
    ),
    "labels": st.dictionaries(
        st.sampled_from(["team", "kubernetes.io/x", "bad key", "bad: key"]), st.text(max_size=70), max_size=2
    ),
    "taints": st.lists(
        st.fixed_dictionaries(
            {"key": st.sampled_from(["team", "nvidia.com/gpu", "bad key"])},
            optional={
                "value": st.text(max_size=5),
                "effect": st.sampled_from(["NO_SCHEDULE", "NO_EXECUTE", "ALWAYS"]),
            },
        ),
        max_size=3,
    ),
    "region": st.sampled_from(["us-central1", "europe-west4", "us-centrall1"]),
    "name": st.sampled_from(["train", "Bad_Name", "x" * 50]),
}
KEYS = st.sampled_from([*PLAUSIBLE, "colour", "gpusPerNode", "x: y"])


@st.composite
def args(draw: st.DrawFn) -> dict[str, Any]:
    chosen = draw(st.lists(KEYS, unique=True, max_size=12))
    result: dict[str, Any] = {}
    for key in chosen:
        plausible = PLAUSIBLE.get(key, JUNK)
        result[key] = draw(st.one_of(plausible, JUNK) if draw(st.integers(0, 4)) == 0 else plausible)
    return result


# One problem line: an arg path (an arg's name, then keys or list indexes), a colon, a message.
PROBLEM = re.compile(r"^(args|[a-z_]+|[a-z]+[A-Z][A-Za-z]*|'x: y')([.\[].*?)?: \S")
DEFAULTED = "name (default: the resource name): "


def check(validate: Any, value: dict[str, Any]) -> None:
    problems: list[str] = []
    details: list[Any] = []
    try:
        with no_hang(5):
            validate("fuzz", value)
    except InvalidArgsError as exc:
        problems = exc.problems or ["(an InvalidArgsError without problems)"]
        details = exc.errors or []
    assert len(details) == len(problems) or not details
    for problem, detail in zip(problems, details or [None] * len(problems), strict=True):
        assert PROBLEM.match(problem), problem
        assert len(problem) < 2000, problem
        # Each line keeps its path and reason, which are its InputPropertyErrorDetails.
        assert isinstance(problem, Problem), f"a plain line, its path lost: {problem}"
        assert detail == {"property_path": problem.path, "reason": problem.reason}
        shown = DEFAULTED if problem.startswith(DEFAULTED) else f"{problem.path}: "
        assert problem == f"{shown}{problem.reason}", (problem, problem.path)


@given(args())
@fuzz(examples=150, deadline_ms=2000)
def test_gpu_node_pool_args_never_crash(value: dict[str, Any]) -> None:
    check(validate_gpu_node_pool_args, value)


@given(args())
@fuzz(examples=100, deadline_ms=2000)
def test_compute_class_args_never_crash(value: dict[str, Any]) -> None:
    check(validate_compute_class_args, value)


@given(
    st.fixed_dictionaries(
        {
            k: PLAUSIBLE[k]
            for k in ("project", "location", "cluster_name", "accelerator", "gpus_per_node", "max_nodes")
        }
    )
)
@fuzz(examples=100, deadline_ms=2000)
def test_required_args_alone_resolve_or_are_refused_by_name(value: dict[str, Any]) -> None:
    check(validate_gpu_node_pool_args, value)
