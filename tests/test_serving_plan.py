"""The serving domain plans itself (issue 35, item 1): serving/plan.py turns a stack-file entry into the
InferenceService's args and the stack output, its commands built from the components' own constants; the
stack layer only loops and wires, with no import circle; the serve example rolls out without an outage."""

from __future__ import annotations

from pathlib import Path

from gke_gpu.gpu.pool import GpuPool
from gke_gpu.serving.hyperdisk_ml import TRANSFER_TIMEOUT_S
from gke_gpu.serving.inference_service import ROLLOUT_TIMEOUT_S, InferenceService
from gke_gpu.serving.model import ModelServerSettings, ServingConfig
from gke_gpu.serving.plan import plan_service
from gke_gpu.serving.server_parts import CONTAINER, PORT
from tests.conftest import stack_render
from tests.test_layers import LIBRARY, _imports, _module_name

L4 = GpuPool.model_validate(
    {
        "name": "l4",
        "accelerator": "nvidia-l4",
        "gpusPerNode": 1,
        "maxNodes": 3,
        "machineType": "g2-standard-8",
    }
)
EVERY_SETTING = {
    "name": "chat",
    "pool": "l4",
    "model": "meta-llama/Llama-3.2-1B-Instruct",
    "server": "vllm",
    "gpusPerReplica": 1,
    "hfTokenSecret": "hf-token",
    "maxModelLen": 8192,
    "scaleOn": "gpu",
    "clientNamespaces": ["web"],
    "gpuMemoryUtilization": 0.85,
    "modelInfo": {"catalog": "meta-llama/Llama-3.2-1B-Instruct"},
    "replicas": {"min": 1, "max": 2},
}


def plan(entry: dict, **options: object):
    service = ServingConfig.model_validate(entry)
    keys = {
        "autopilot": False,
        "surge": True,
        "project": "p-123456",
        "cluster_name": "gpu",
        "image": "vllm/x:1",
    }
    return plan_service(service, L4, **(keys | options))  # type: ignore[arg-type]


def test_every_shared_setting_reaches_the_component_once_written() -> None:
    planned = plan(EVERY_SETTING)
    service = ServingConfig.model_validate(EVERY_SETTING)
    # Each setting the section and the component share (one model: ModelServerSettings) reaches the
    # args under its own name, with the entry's value; none is mapped by hand.
    for field in ModelServerSettings.model_fields:
        value = getattr(service, field)
        if value is not None:
            expected = value.model_dump(exclude_none=True) if hasattr(value, "model_dump") else value
            assert planned.args[field] == expected, field  # type: ignore[literal-required]
    assert planned.args["max_replicas"] == 2 and planned.args["replicas"] == 1
    assert planned.args["surge"] is True
    # And the component takes them as they are.
    InferenceService.check_args(planned.resource_name, planned.args)


def test_the_commands_are_built_from_the_components_constants() -> None:
    summary = plan(EVERY_SETTING).summary("http://chat.serve-chat.svc:8000")
    commands = summary["commands"]
    assert commands["wait"].endswith(f"--timeout={ROLLOUT_TIMEOUT_S // 60}m")
    assert commands["portForward"].endswith(f"service/chat {PORT}:{PORT}")
    assert commands["logs"].endswith(f"-c {CONTAINER}") and f"localhost:{PORT}/" in commands["ask"]
    hyperdisk = {
        **EVERY_SETTING,
        "model": "gs://models-bucket/llama",
        "weights": {"via": "hyperdiskMl", "sizeGib": 100},
    }
    del hyperdisk["hfTokenSecret"], hyperdisk["modelInfo"]
    pool = {**L4.model_dump(by_alias=True, exclude_none=True), "zones": ["us-central1-a"]}
    service = ServingConfig.model_validate(hyperdisk)
    from gke_gpu.serving.plan import plan_service as planner

    planned = planner(
        service,
        GpuPool.model_validate(pool),
        autopilot=False,
        surge=False,
        project="p-123456",
        cluster_name="gpu",
        image="vllm/x:1",
    )
    wait = planned.summary("url")["commands"]["wait"]
    # A Hyperdisk ML volume is filled before the first replica: the wait is the rollout's and the transfer's.
    assert wait.endswith(f"--timeout={(ROLLOUT_TIMEOUT_S + TRANSFER_TIMEOUT_S) // 60}m")


def test_no_import_circle_runs_through_serving() -> None:
    """Every import, lazy ones included, of the serving domain and the stack's serving modules: none
    leads back to the module it left (program_gateway imported program_serving, which imports it)."""
    modules = {
        _module_name(p): p
        for p in LIBRARY.rglob("*.py")
        if p.name != "__init__.py"
        and (
            p.parent.name == "serving" or p.stem in ("program_serving", "program_gateway", "serving_section")
        )
    }
    graph = {name: sorted(set(modules) & _imports(path)) for name, path in modules.items()}

    def circle(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            name, path = stack.pop()
            for nxt in graph[name]:
                if nxt == start:
                    return [*path, nxt]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
        return None

    assert {name: circle(name) for name in graph if circle(name)} == {}


def test_the_serve_example_rolls_out_without_an_outage() -> None:
    result = stack_render("serve")
    assert not [w for w in result.warnings if "a rollout of" in w]
    assert result.outputs["serving"]["chat"]["rollout"].startswith(
        "a surge replica (1 GPU(s)) starts and serves"
    )
    strategy = next(r for r in result.resources if r.type == "kubernetes:apps/v1:Deployment").inputs["spec"]
    assert strategy["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    # Its budget keeps the last replica while the autoscaler may leave one.
    budget = next(r for r in result.resources if r.type == "kubernetes:policy/v1:PodDisruptionBudget")
    assert budget.inputs["spec"]["minAvailable"] == 1
    assert "maxNodes: 3" in (Path(__file__).parent.parent / "Pulumi.serve.yaml").read_text()
