"""Shape errors show the shape (issue 26): a mapping or list given the wrong type names the keys it
takes (or its entries' shape) and one valid value; and one problem gives one message."""

from typing import Any, get_args

import pytest
from pydantic import BaseModel, TypeAdapter

from gke_gpu.core.shapes import annotation_at, model_example, suggestion
from gke_gpu.gpu.pool import GpuPool
from gke_gpu.stack.stack_model import StackConfig
from tests.conftest import L4_POOL, STANDARD_CLUSTER, config_error

ZONAL = {**STANDARD_CLUSTER, "location": "us-central1-a"}


def _models(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    def inner(annotation: Any) -> list[type[BaseModel]]:
        found = [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []
        for arg in get_args(annotation):
            found += inner(arg)
        return found

    for field in model.model_fields.values():
        for sub in inner(field.annotation):
            if sub.__name__ not in seen:
                seen[sub.__name__] = sub
                _models(sub, seen)
    return seen


STACK_MODELS = _models(StackConfig, {})


@pytest.mark.parametrize("name", sorted(STACK_MODELS))
def test_every_section_model_has_a_valid_example(name: str) -> None:
    model = STACK_MODELS[name]
    example = model_example(model)
    assert example, f"{name} has no example (model_config = example(...))"
    model.model_validate(example)  # raises when the example drifts from its model
    model.model_validate(model_example(model, by_name=True), by_alias=False, by_name=True)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            dict(
                cluster=ZONAL,
                gpuPools=[L4_POOL],
                serving=[{"name": "chat", "pool": "l4", "model": "gs://b/m", "replicas": 2}],
            ),
            "gke-gpu:serving[0].replicas: 2 is not allowed; expected a mapping (keys: min, max), "
            "such as {min: 2, max: 2}",
        ),
        (
            dict(cluster=ZONAL, gpuPools=[{**L4_POOL, "reservation": "my-res"}]),
            "gke-gpu:gpuPools[0].reservation: 'my-res' is not allowed; expected a mapping (keys: type, "
            "name), such as {type: SPECIFIC, name: my-res}",
        ),
        (
            dict(cluster=ZONAL, gpuPools=[{**L4_POOL, "zones": "us-central1-a"}]),
            "gke-gpu:gpuPools[0].zones: 'us-central1-a' is not allowed; expected a list of strings, "
            "such as [us-central1-a]",
        ),
        (
            dict(cluster=ZONAL, gpuPools=[{**L4_POOL, "sharing": "time-sharing"}]),
            "gke-gpu:gpuPools[0].sharing: 'time-sharing' is not allowed; expected a mapping (required "
            "keys: strategy, maxClientsPerGpu), such as {strategy: TIME_SHARING, maxClientsPerGpu: 2}",
        ),
        (
            dict(cluster=ZONAL, gpuPools=[{**L4_POOL, "taints": "a=b:NoSchedule"}]),
            "gke-gpu:gpuPools[0].taints: 'a=b:NoSchedule' is not allowed; expected a list of mappings "
            "(required keys: key; optional: value, effect), such as [{key: dedicated, value: gpu, "
            "effect: NO_SCHEDULE}]",
        ),
        (
            dict(cluster=ZONAL, gpuPools=[{**L4_POOL, "labels": ["team"]}]),
            "gke-gpu:gpuPools[0].labels: ['team'] is not allowed; expected a mapping of strings to "
            "strings, such as {key: value}",
        ),
        (
            {"cluster": "autopilot"},
            "gke-gpu:cluster: 'autopilot' is not allowed; expected a mapping (required keys: mode; "
            "optional: name, location,",
        ),
    ],
    ids=["replicas", "reservation", "zones", "sharing", "taints", "labels", "cluster"],
)
def test_a_wrong_type_names_the_shape_and_a_valid_example(raw: dict[str, Any], expected: str) -> None:
    assert expected in config_error(raw)


def test_a_scalar_for_a_mapping_says_which_mapping_it_would_be() -> None:
    assert "such as {mode: autopilot}" in config_error({"cluster": "autopilot"})


def test_a_section_that_is_not_a_list_shows_a_list_of_its_entries() -> None:
    message = config_error(dict(cluster=ZONAL, gpuPools={"l4": L4_POOL}))
    assert (
        "gke-gpu:gpuPools: {'l4': {" in message
        and "is not allowed; expected a list of mappings (required keys: name, accelerator; optional: "
        "gpusPerNode,"
        in message
        and "such as [{name: l4, accelerator: nvidia-l4, gpusPerNode: 1, maxNodes: 2}]" in message
    ), message


@pytest.mark.parametrize(
    ("loc", "given"),
    [
        (("gpuPools", 0, "reservation"), "my-res"),
        (("gpuPools", 0, "reservation"), 3),
        (("gpuPools", 0, "sharing"), "mps"),
        (("gpuPools", 0, "zones"), "us-central1-b"),
        (("gpuPools", 0, "taints"), {"key": "a"}),
        (("gpuPools", 0, "taints", 0), "a"),
        (("serving", 0, "replicas"), 4),
        (("batch", "teams", 0, "pools", "l4"), 8),
        (("cluster",), "standard"),
        (("cluster", "systemPool"), "e2-standard-8"),
        (("gpuPools",), {"name": "l4", "accelerator": "nvidia-l4"}),
    ],
)
def test_every_suggested_value_is_valid_where_it_is_suggested(loc: tuple[Any, ...], given: Any) -> None:
    annotation = annotation_at(StackConfig, loc, by_name=False)
    assert annotation is not None, loc
    example = suggestion(annotation, given)
    assert example is not None, (loc, given)
    TypeAdapter(annotation).validate_python(example)


def test_a_component_arg_shows_its_shape_with_field_names() -> None:
    annotation = annotation_at(GpuPool, ("sharing",), by_name=True)
    assert suggestion(annotation, "MPS", by_name=True) == {"strategy": "MPS", "max_clients_per_gpu": 2}


def test_a_repeated_team_name_is_one_problem() -> None:
    team = {"name": "research", "pools": {"l4": {"gpus": 1}}}
    message = config_error(
        dict(cluster=ZONAL, gpuPools=[L4_POOL], batch={"kueue": True, "teams": [team, team]})
    )
    assert message.count("\n  - ") == 1, message
    assert (
        "gke-gpu:batch.teams[1].name: 'research' is not allowed: it is also teams[0]'s name; each team needs "
        "a name of its own (such as research-2)"
    ) in message


def test_a_repeated_team_with_its_own_namespace_still_reports_that_namespace() -> None:
    teams = [
        {"name": "research", "pools": {"l4": {"gpus": 1}}},
        {"name": "research", "namespace": "kube-system", "pools": {"l4": {"gpus": 1}}},
    ]
    message = config_error(dict(cluster=ZONAL, gpuPools=[L4_POOL], batch={"kueue": True, "teams": teams}))
    assert "teams[1].name" in message and "teams[1].namespace: " in message, message


def test_a_location_outside_the_region_is_one_problem_with_what_is_allowed() -> None:
    message = config_error(
        dict(cluster={**STANDARD_CLUSTER, "location": "europe-west4-a"}, gpuPools=[L4_POOL])
    )
    assert message.count("\n  - ") == 1, message
    assert (
        "gke-gpu:cluster.location: 'europe-west4-a' is not allowed: it is not region us-central1 or one "
        "of its zones; allowed: us-central1 (a regional cluster) or one of its zones such as us-central1-a"
    ) in message


def test_a_workload_name_for_the_workloads_list_shows_the_short_form() -> None:
    message = config_error(dict(cluster=ZONAL, gpuPools=[L4_POOL], workloads="nvidia-smi"))
    assert (
        "gke-gpu:workloads: 'nvidia-smi' is not allowed; expected a list of workload names or mappings, "
        "such as [nvidia-smi]"
    ) in message
