"""Knowing the model, fuzzed (issue 24): serving entries with catalogued, declared (`modelInfo`) and unknown
models, on pools of several GPU types and sizes. Whatever is drawn, the stack rules either refuse it with a
ConfigError (no other exception, no hang) or accept it, and then every component's full rules accept it
too (check_components): the model rules the stack file and InferenceService share agree."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gke_gpu.serving.model_catalog import catalogue
from gke_gpu.stack.config import ConfigError, parse_settings
from gke_gpu.stack.program import check_components
from tests.test_fuzz import fuzz, no_hang

CATALOGUED = sorted(m.name for m in catalogue().values())
MODEL_INFO = st.fixed_dictionaries(
    {},
    optional={
        "parameters": st.sampled_from([500_000_000, 7_000_000_000, 70_000_000_000]),
        "dtype": st.sampled_from(["bfloat16", "fp8", "int4"]),
        "attentionHeads": st.sampled_from([12, 28, 32, 40, 64]),
        "kvHeads": st.sampled_from([1, 2, 4, 8]),
        "layers": st.sampled_from([24, 32, 80]),
        "headDim": st.sampled_from([64, 128]),
        "maxContext": st.sampled_from([4096, 32768, 131072]),
        "gated": st.booleans(),
    },
) | st.builds(lambda name: {"catalog": name}, st.sampled_from([*CATALOGUED, "acme/unknown"]))


@st.composite
def entries(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["catalogued", "declared", "unknown", "bucket"]))
    entry: dict[str, Any] = {"name": "chat", "pool": draw(st.sampled_from(["l4", "h100", "a100"]))}
    if kind == "catalogued":
        entry["model"] = draw(st.sampled_from(CATALOGUED))
    elif kind == "unknown":
        entry["model"] = "acme/some-model"
    else:
        entry["model"] = "gs://models-bucket/model" if kind == "bucket" else "acme/private-model"
        entry["modelInfo"] = draw(MODEL_INFO)
    entry.update(
        draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "gpusPerReplica": st.sampled_from([1, 2, 3, 4, 8, 16]),
                    "maxModelLen": st.sampled_from([2048, 8192, 40960, 65536, 200_000]),
                    "hfTokenSecret": st.just("hf-token"),
                    "gpuMemoryUtilization": st.sampled_from([0.5, 0.92, 1]),
                },
            )
        )
    )
    if entry["model"].startswith("gs://"):
        entry.pop("hfTokenSecret", None)
    return entry


@st.composite
def stacks(draw: st.DrawFn) -> dict[str, Any]:
    pools = [
        {"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": draw(st.sampled_from([1, 2, 4, 8]))},
        {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8},
        {"name": "a100", "accelerator": "nvidia-tesla-a100", "gpusPerNode": draw(st.sampled_from([1, 4, 8]))},
    ]
    for pool in pools:
        pool |= {
            "driverVersion": "LATEST",
            "maxNodes": 4,
            "diskSizeGb": draw(st.sampled_from([100, 200, 600])),
        }
    return {
        "cluster": {"mode": "standard", "name": "gpu-fuzz", "location": "us-central1"},
        "gpuPools": pools,
        "serving": [draw(entries())],
    }


@given(stacks())
@fuzz(examples=80, deadline_ms=5000)
def test_what_the_model_rules_accept_the_serving_component_accepts(raw: dict[str, Any]) -> None:
    with no_hang(10):
        try:
            settings, _ = parse_settings(raw, project="p-123456", region="us-central1", stack="fuzz")
        except ConfigError:
            event("refused by the stack rules")
            return
        event("accepted")
        check_components(settings, component_rules=True)  # a ConfigError if a component refuses it
