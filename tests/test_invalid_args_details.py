"""InvalidArgsError's details: one `InputPropertyErrorDetails(property_path, reason)` per problem, the
path and the reason as the check reported them (never split back out of the message line, which a
key or a rewritten path may break at the wrong ": "), and the message itself unchanged."""

import copy
import pickle
from typing import Any

import pytest

from gke_gpu import GpuComputeClass, GpuNodePool, InvalidArgsError
from gke_gpu.serving.inference_service import InferenceService
from tests.conftest import pool_args, service_args

POOL = pool_args()
SERVICE = service_args()
PROFILE = {"accelerator": "nvidia-l4", "gpus_per_node": 1}
NAME_RULE = (
    "is not a valid node pool name; use at most 40 lowercase letters, digits and hyphens, starting with a "
    "letter"
)


def refused(component: Any, name: str, args: dict[str, Any]) -> InvalidArgsError:
    with pytest.raises(InvalidArgsError) as info:
        component.check_args(name, args)
    error = info.value
    assert len(error.errors or []) == len(error.problems)
    return error


def details(error: InvalidArgsError) -> list[tuple[str, str]]:
    return [(d["property_path"], d["reason"]) for d in error.errors or []]


def test_a_defaulted_name_is_the_name_property() -> None:
    error = refused(GpuNodePool, "BAD_NAME", POOL)
    assert str(error) == (
        "GpuNodePool 'BAD_NAME': invalid args (1 problem(s)):\n"
        f"  - name (default: the resource name): 'BAD_NAME' {NAME_RULE}"
    )
    assert details(error) == [("name", f"'BAD_NAME' {NAME_RULE}")]


@pytest.mark.parametrize(
    ("component", "args"), [(GpuComputeClass, PROFILE), (InferenceService, SERVICE)], ids=["class", "service"]
)
def test_every_component_with_a_defaulted_name_keys_it_by_name(component: Any, args: dict[str, Any]) -> None:
    error = refused(component, "BAD_NAME", args)
    (problem,) = error.problems
    assert problem.startswith("name (default: the resource name): 'BAD_NAME' ")
    ((path, reason),) = details(error)
    assert path == "name" and problem == f"name (default: the resource name): {reason}"


def test_a_name_given_is_named_as_given() -> None:
    error = refused(GpuNodePool, "train", {**POOL, "name": "BAD_NAME"})
    assert error.problems == [f"name: 'BAD_NAME' {NAME_RULE}"]
    assert details(error) == [("name", f"'BAD_NAME' {NAME_RULE}")]


def test_an_unknown_key_with_a_colon_is_one_property() -> None:
    error = refused(GpuNodePool, "train", {**POOL, "x: y": 1})
    (problem,) = error.problems
    assert problem.startswith("'x: y': unknown key; allowed keys here: accelerator, ")
    assert details(error) == [("'x: y'", problem.removeprefix("'x: y': "))]


def test_nested_paths_keep_their_keys() -> None:
    # A rule's path (a label's value under its key) and pydantic's (a label value of the wrong type).
    error = refused(GpuNodePool, "train", {**POOL, "labels": {"team: a": "bad value!"}})
    assert ("labels.team: a", "'bad value!' is not a valid Kubernetes label value") in details(error)
    assert "  - labels.team: a: 'bad value!' is not a valid Kubernetes label value" in str(error)
    error = refused(GpuNodePool, "train", {**POOL, "labels": {"team: a": 5}})
    assert details(error) == [("labels.'team: a'", "5 is not allowed; expected a string")]
    error = refused(InferenceService, "chat", {**SERVICE, "tolerations": [{"operator": "Equal"}]})
    assert details(error) == [("tolerations[0].key", "required unless operator is Exists")]


def test_every_problem_of_a_multi_problem_error_is_its_own_detail() -> None:
    args = {**POOL, "x: y": 1, "disk_size_gb": 1, "labels": {"team: a": "bad value!"}}
    error = refused(GpuNodePool, "BAD_NAME", args)
    assert error.message == str(error) and str(error).startswith(
        f"GpuNodePool 'BAD_NAME': invalid args ({len(error.problems)} problem(s)):\n"
    )
    assert str(error).split("\n")[1:] == [f"  - {p}" for p in error.problems]
    paths = [path for path, _ in details(error)]
    assert paths[:2] == ["'x: y'", "disk_size_gb"], "shape problems first; the rules' only on a valid shape"
    error = refused(GpuNodePool, "BAD_NAME", {**POOL, "labels": {"team: a": "bad value!"}})
    assert details(error) == [
        ("name", f"'BAD_NAME' {NAME_RULE}"),
        ("labels", "key 'team: a' is not a valid Kubernetes label key"),
        ("labels.team: a", "'bad value!' is not a valid Kubernetes label value"),
    ]
    for problem, (path, reason) in zip(error.problems[1:], details(error)[1:], strict=True):
        assert problem == f"{path}: {reason}"


def test_a_problem_is_its_line_and_keeps_its_parts() -> None:
    from gke_gpu.core.common import Problem, Problems

    problems = Problems()
    problems.add("labels.a: b", "bad")
    (problem,) = problems.items
    assert problem == "labels.a: b: bad" and isinstance(problem, str)
    assert (problem.path, problem.reason) == ("labels.a: b", "bad")
    for copied in (copy.deepcopy(problem), pickle.loads(pickle.dumps(problem))):
        assert isinstance(copied, Problem) and copied == problem
        assert (copied.path, copied.reason) == (problem.path, problem.reason)
    shown = Problem("name", "bad", "name (default: x): bad")
    assert (shown, shown.path, shown.reason) == ("name (default: x): bad", "name", "bad")


def test_a_plain_line_is_about_the_args_as_a_whole() -> None:
    error = InvalidArgsError("GpuNodePool", "train", ["a: b: c"])
    assert details(error) == [("", "a: b: c")]


def test_a_cluster_name_known_only_at_deploy_time_names_its_arg() -> None:
    """GpuMonitoring checks a cluster name that is an Output once its value is known."""
    from gke_gpu.monitoring.gpu_monitoring import _checked_cluster_name

    with pytest.raises(InvalidArgsError) as info:
        _checked_cluster_name("monitoring", True, 'x"} or vector(1) #')
    assert details(info.value) == [("cluster_name", "'x\"} or vector(1) #' is not a Kubernetes label value")]


def test_the_error_survives_pickling_and_copying_with_its_details() -> None:
    error = refused(GpuNodePool, "BAD_NAME", POOL)
    for copied in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error)):
        assert type(copied) is InvalidArgsError
        assert str(copied) == str(error)
        assert details(copied) == details(error)
        assert (copied.component, copied.resource_name) == (error.component, error.resource_name)
