"""The library's calling convention (issue 26): every public component takes its args as one `args=`
mapping or as keyword arguments, as pulumi-gcp's resources do, with the same check and the same
InvalidArgsError naming the arg; an unknown keyword is an InvalidArgsError, never a TypeError."""

import inspect
from typing import Any

import pulumi
import pytest

import gke_gpu
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpu.node_pool import GpuNodePool
from tests.test_component_args import COMPONENTS, NAME, construct
from tools.offline import RunResult, run_program

POOL = {
    "project": "ml-project-123",
    "location": "us-central1",
    "cluster_name": "ml",
    "node_service_account_email": "nodes@ml-project-123.iam.gserviceaccount.com",
    "accelerator": "nvidia-l4",
    "gpus_per_node": 1,
    "max_nodes": 4,
}


def declared(result: RunResult) -> list[tuple[str, str, str]]:
    """What a run declared, in an order that does not depend on the event loop."""
    return sorted((r.type, r.name, repr(r.inputs)) for r in result.resources)


def keywords(component: str, args: dict[str, Any]) -> RunResult:
    cls = COMPONENTS[component][0]
    return _construct_with(cls, component, args)


def _construct_with(cls: Any, component: str, args: dict[str, Any]) -> RunResult:
    kubernetes = COMPONENTS[component][3]

    def program() -> None:
        opts = None
        if kubernetes:
            import pulumi_kubernetes as k8s

            opts = pulumi.ResourceOptions(provider=k8s.Provider("k8s", kubeconfig="apiVersion: v1"))
        cls(NAME, opts=opts, **args)

    return run_program({}, program=program)


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_keyword_args_declare_what_one_args_mapping_declares(component: str) -> None:
    args = COMPONENTS[component][2]
    by_mapping, by_keywords = construct(component, args), keywords(component, args)
    assert by_keywords.error is None, by_keywords.error
    assert declared(by_keywords) == declared(by_mapping)


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_an_unknown_keyword_is_an_invalid_args_error_naming_it(component: str) -> None:
    result = keywords(component, {**COMPONENTS[component][2], "colour": "red"})
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    (problem,) = result.error.problems
    assert problem.startswith("colour: unknown key; allowed keys here: "), problem
    assert [r for r in result.resources if r.name.startswith(NAME)] == []


def test_a_gpu_node_pool_takes_keywords_as_pulumi_gcp_resources_do() -> None:
    def program() -> None:
        GpuNodePool("l4", **POOL)

    result = run_program({}, program=program)
    assert result.error is None, result.error
    (pool,) = result.of_type("gcp:container/nodePool:NodePool")
    assert pool.inputs["nodeConfig"]["guestAccelerators"][0]["type"] == "nvidia-l4"


def test_a_bad_keyword_is_named_as_the_same_arg_as_in_a_mapping() -> None:
    def program(**given: Any) -> Any:
        return lambda: GpuNodePool("l4", **given)

    by_keyword = run_program({}, program=program(**{**POOL, "max_nodes": 0}))
    by_mapping = run_program({}, program=program(args={**POOL, "max_nodes": 0}))
    assert isinstance(by_keyword.error, InvalidArgsError)
    assert by_keyword.error.problems == by_mapping.error.problems  # type: ignore[union-attr]
    assert by_keyword.error.problems[0].startswith("max_nodes: 0 is not allowed")


def test_args_and_keywords_together_are_refused_naming_the_keywords() -> None:
    result = run_program({}, program=lambda: GpuNodePool("l4", {**POOL}, spot=True))
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    assert result.error.problems == [
        "spot: given as a keyword and args= given too; give the args either as one args= mapping or as "
        "keywords, not both"
    ]


def test_no_args_at_all_names_every_required_arg() -> None:
    result = run_program({}, program=lambda: GpuNodePool("l4"))
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    assert "accelerator: required" in result.error.problems


@pytest.mark.parametrize("component", sorted(gke_gpu.PUBLIC_COMPONENTS))
def test_every_public_component_takes_args_or_keywords(component: str) -> None:
    cls = getattr(gke_gpu, component)
    parameters = inspect.signature(cls.__init__).parameters
    assert parameters["name"].kind is inspect.Parameter.POSITIONAL_ONLY, "an arg called name is a keyword"
    assert parameters["args"].default is not inspect.Parameter.empty
    assert parameters["opts"].default is None
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def test_a_component_advises_its_own_args_never_a_stack_file_key() -> None:
    from gke_gpu.workloads.batch_queues import GpuBatchQueues
    from tests.test_teams import QUEUE

    with pytest.raises(InvalidArgsError) as refused:
        GpuBatchQueues.check_args(
            "batch",
            {
                "queues": [{**QUEUE, "shares": [{"team": "ml", "gpus": 5}]}],
                "teams": [{"name": "ml", "namespace": "ml"}],
            },
        )
    text = str(refused.value)
    assert "more than its 4 (its gpus); lower a share or raise the queue's gpus" in text
    assert "maxNodes" not in text
