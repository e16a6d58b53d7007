"""A disaggregated service held to its upstream sources field by field: llm-d v0.9.0's P/D and wide-EP
manifests and router values (tests/upstream/llm-d, vendored), the endpoint picker's configuration
against the EndpointPickerConfig schema written from llm-d-router v0.10.0's Go types and the plugin types
that tag registers (tests/upstream/llm-d-router), and the InferencePool the chart makes of the values
against its vendored CRD. The differences accepted are listed here, each with its reason
(docs/serving.md, "Disaggregated prefill and decode", says them too)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gke_gpu.serving.epp_config import pd_config
from tests.kubernetes_schemas import validate
from tests.test_gateway import chart_inference_pool
from tests.test_serving_pd import container, env, pod_of, rendered, role
from tools.offline import RunResult

UPSTREAM = Path(__file__).parent / "upstream"
LLMD = UPSTREAM / "llm-d" / "guides"
SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "endpointpickerconfig.llm-d.ai_v1alpha1.json").read_text()
)
REGISTERED = yaml.safe_load((UPSTREAM / "llm-d-router" / "registered-plugins.yaml").read_text())
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"


def llmd(path: str) -> Any:
    docs = list(yaml.safe_load_all((LLMD / path).read_text(encoding="utf-8")))
    return docs[0] if len(docs) == 1 else docs


def llmd_epp_config(values_path: str) -> dict[str, Any]:
    epp = llmd(values_path)["router"]["epp"]
    return yaml.safe_load(epp["pluginsCustomConfig"][epp["pluginsConfigFile"]])


@pytest.fixture
def pd() -> RunResult:
    return rendered("pd")


@pytest.fixture
def wide() -> RunResult:
    return rendered("wide")


# ---- The endpoint picker's configuration --------------------------------------------------------


def test_the_schema_takes_llm_d_s_own_configurations_and_refuses_what_the_picker_refuses() -> None:
    """The schema written from the Go types is no stricter than the picker: llm-d's guides' configs pass;
    an unknown field, a plugin without a type, a profile without a name are refused (strict decoding)."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for path in (
        "pd-disaggregation/router/pd-disaggregation.values.yaml",
        "wide-ep-lws/router/wide-ep-lws.values.yaml",
    ):
        validator.validate(llmd_epp_config(path))
    config = pd_config()
    for broken in (
        {**config, "plugin": []},
        {**config, "plugins": [{"name": "x"}]},
        {**config, "schedulingProfiles": [{"plugins": []}]},
        {**config, "schedulingProfiles": [{"name": "p", "plugins": [{"pluginRef": "x", "weight": "2"}]}]},
        {k: v for k, v in config.items() if k != "schedulingProfiles"},
    ):
        assert list(validator.iter_errors(broken)), broken


def test_our_configuration_validates_and_names_only_registered_current_plugins() -> None:
    config = pd_config()
    jsonschema.Draft202012Validator(SCHEMA).validate(config)
    types = [p["type"] for p in config["plugins"]]
    assert set(types) <= set(REGISTERED["registered"]), set(types) - set(REGISTERED["registered"])
    assert not set(types) & set(REGISTERED["deprecated"])
    # A plugin's name defaults to its type (endpointpickerconfig_types.go); every reference resolves.
    names = {p.get("name") or p["type"] for p in config["plugins"]}
    refs = {ref["pluginRef"] for profile in config["schedulingProfiles"] for ref in profile["plugins"]}
    assert refs <= names
    (handler,) = [p for p in config["plugins"] if p["type"] == "disagg-profile-handler"]
    # The nested form (the flat `deciderPluginName` is deprecated), naming a declared decider; the
    # profiles are the handler's default names.
    assert handler["parameters"] == {"deciders": {"prefill": "always-disagg-pd-decider"}}
    assert handler["parameters"]["deciders"]["prefill"] in names
    assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]
    filters = {p["name"]: p["plugins"][0]["pluginRef"] for p in config["schedulingProfiles"]}
    assert filters == {"prefill": "prefill-filter", "decode": "decode-filter"}


def test_our_configuration_is_llm_d_s_wide_ep_one_less_its_deprecated_parts() -> None:
    """llm-d v0.9.0's wide-EP router values (no hardware-calibrated figure, unlike its P/D guide's
    prefix-cache-affinity-filter): the same profiles and weights; the headers handler left out (the
    profile handler sets the header at v0.10.0) and the flat parameter written nested; the picker named."""
    theirs, ours = llmd_epp_config("wide-ep-lws/router/wide-ep-lws.values.yaml"), pd_config()
    their_types = {p["type"] for p in theirs["plugins"]} - {"disagg-headers-handler"}
    assert {p["type"] for p in ours["plugins"]} == their_types | {"max-score-picker"}

    def profile(config: dict[str, Any], name: str) -> list[tuple[str, float]]:
        (found,) = [p for p in config["schedulingProfiles"] if p["name"] == name]
        return [
            (r["pluginRef"], r.get("weight", 1))
            for r in found["plugins"]
            if r["pluginRef"] != "max-score-picker"
        ]

    for name in ("prefill", "decode"):
        assert profile(ours, name) == profile(theirs, name)


def test_the_role_label_is_the_one_the_filters_read(pd: RunResult) -> None:
    assert REGISTERED["roleLabel"] == "llm-d.ai/role"
    assert (
        role(pd, "prefill")["spec"]["selector"]["matchLabels"][REGISTERED["roleLabel"]]
        in REGISTERED["prefillRoles"]
    )
    assert (
        role(pd, "decode")["spec"]["selector"]["matchLabels"][REGISTERED["roleLabel"]]
        in REGISTERED["decodeRoles"]
    )


@pytest.mark.parametrize("variant", ["pd", "wide"])
def test_the_pool_the_chart_makes_of_the_values_fits_the_crd(
    variant: str, request: pytest.FixtureRequest
) -> None:
    result: RunResult = request.getfixturevalue(variant)
    (chart,) = [c for c in result.of_type("kubernetes:helm.sh/v4:Chart") if c.name.startswith("gateway-")]
    service = chart.inputs["name"]
    validate(chart_inference_pool(chart.inputs["values"], service, f"serve-{service}"))


# ---- The P/D guide's Pods -----------------------------------------------------------------------


def _kv_config(args: list[str]) -> dict[str, Any]:
    (value,) = [a.split("=", 1)[1] for a in args if a.startswith("--kv-transfer-config=")]
    return json.loads(value)


def test_the_kv_transfer_config_is_llm_d_s_but_for_the_roles_vllm_now_asks_for(pd: RunResult) -> None:
    """llm-d's P/D guide passes `kv_both` on both; vLLM 0.33.0 deprecates it for the NixlConnector
    (v1/nixl/connector.py's warning, nixl_connector_usage.md "KV Role Options"): kv_producer on prefill,
    kv_consumer on decode. kv_load_failure_policy `fail` is vLLM's default, written as llm-d's wide-EP
    manifests write it."""
    theirs = llmd("pd-disaggregation/modelserver/gpu/vllm/base/patch-prefill.yaml")
    (their_container,) = theirs["spec"]["template"]["spec"]["containers"]
    their_args = their_container["args"]
    (their_kv,) = [
        json.loads(their_args[i + 1]) for i, a in enumerate(their_args) if a == "--kv-transfer-config"
    ]
    for name, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        ours = _kv_config(container(pod_of(role(pd, name)))["args"])
        assert ours == {**their_kv, "kv_role": kv_role, "kv_load_failure_policy": "fail"}
    assert their_kv["kv_role"] == "kv_both"


def test_the_roles_environment_and_ports_are_llm_d_s(pd: RunResult) -> None:
    patch = llmd("pd-disaggregation/modelserver/gpu/vllm/base/patch-prefill.yaml")
    (their,) = patch["spec"]["template"]["spec"]["containers"]
    their_env = {e["name"]: e.get("value", e.get("valueFrom")) for e in their["env"]}
    prefill = container(pod_of(role(pd, "prefill")))
    for name in ("VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"):
        assert env(prefill)[name] == their_env[name]
    base = llmd("recipes/modelserver/base/single-host/pd/base/prefill-deployment.yaml")
    (their_base,) = base["spec"]["template"]["spec"]["containers"]
    assert {p["containerPort"] for p in their_base["ports"]} == {p["containerPort"] for p in prefill["ports"]}
    # GKE's A3 Ultra overlay: UCX told every RoCE address is reachable; gIB's NCCL plugins off.
    gke = llmd("pd-disaggregation/modelserver/gpu/vllm/gke/base/kustomization.yaml")
    gke_env = {
        e["name"]: e["value"]
        for e in yaml.safe_load(gke["patches"][0]["patch"])["spec"]["template"]["spec"]["containers"][0][
            "env"
        ]
    }
    tuner = llmd("recipes/modelserver/components/disable-gke-nccl-tuner-patch/kustomization.yaml")
    # A JSON patch of the Deployment: each op adds one variable.
    tuner_env = {
        op["value"]["name"]: op["value"]["value"] for op in yaml.safe_load(tuner["patches"][0]["patch"])
    }
    for name in ("prefill", "decode"):
        ours = env(container(pod_of(role(pd, name))))
        assert {k: ours[k] for k in gke_env} == gke_env
        assert {k: ours[k] for k in tuner_env} == tuner_env


def test_the_sidecar_is_llm_d_s_less_its_log_level(pd: RunResult) -> None:
    theirs = llmd("recipes/modelserver/base/single-host/pd/vllm/patch-sidecar.yaml")
    (their_sidecar,) = theirs["spec"]["template"]["spec"]["initContainers"]
    (ours,) = pod_of(role(pd, "decode"))["spec"]["initContainers"]
    assert (ours["name"], ours["restartPolicy"]) == (their_sidecar["name"], their_sidecar["restartPolicy"])
    their_args = [a for a in their_sidecar["args"] if not a.startswith("--zap-log-level")]
    # The vLLM port llm-d's kustomization patches decode to, written out (the sidecar's default).
    assert ours["args"] == [*their_args[:1], "--model-server-port=8200", *their_args[1:]]


# ---- The wide-EP guide's LeaderWorkerSets --------------------------------------------------------


def _launch_flags(manifest: dict[str, Any]) -> dict[str, str]:
    """llm-d's shell launch, its `vllm serve` flags as {flag: value} (the value `` for a switch)."""
    (their,) = manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    script = their["args"][0]
    command = script[script.index("exec vllm serve") :]
    command = re.sub(r"#[^\n]*", "", command).replace("\\\n", " ")
    words = shlex.split(command)[3:]
    flags: dict[str, str] = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            key, _, value = word.partition("=")
            nxt = words[i + 1] if i + 1 < len(words) else ""
            flags[key.replace("_", "-")] = value or ("" if nxt.startswith("--") or not nxt else nxt)
    return flags


def _our_flags(args: list[str]) -> dict[str, str]:
    return {a.partition("=")[0]: a.partition("=")[2] for a in args if a.startswith("--")}


@pytest.mark.parametrize("name", ["prefill", "decode"])
def test_the_wide_ep_launch_is_llm_d_s_with_the_all_to_all_it_can_run(wide: RunResult, name: str) -> None:
    """Every data- and expert-parallel flag of llm-d's launch, with the same values where they are the
    layout's (supervisor and RPC ports, local ranks, the leader's address from LWS); what differs: the
    all-to-all (NCCL's allgather_reducescatter, not DeepEP, which needs privileged Pods and llm-d's
    image: docs/serving.md), no --moe-backend deep_gemm (DeepGEMM is DeepEP's companion here), no
    decode batch overlap or token caps (tuning left out), no --gpu-memory-utilization 0.80."""
    theirs = _launch_flags(llmd(f"wide-ep-lws/modelserver/gpu/vllm/base/{name}.yaml"))
    ours = _our_flags(container(pod_of(wide.one(LWS, f"serve-dsr1-{name}-leader-worker-set").inputs))["args"])
    shared = {
        "--enable-expert-parallel",
        "--data-parallel-multi-port-external-lb",
        "--data-parallel-supervisor-port",
        "--data-parallel-rpc-port",
        "--port",
    }
    for flag in shared:
        assert ours[flag] == theirs[flag], flag
    assert (
        ours["--data-parallel-address"] == "$(LWS_LEADER_ADDRESS)"
        and theirs["--data-parallel-address"] == "${LWS_LEADER_ADDRESS}"
    )
    assert (
        ours["--data-parallel-size-local"] == "8" and theirs["--data-parallel-size-local"] == "$DP_SIZE_LOCAL"
    )
    assert ours["--all2all-backend"] == "allgather_reducescatter"
    assert theirs["--all2all-backend"].startswith("deepep_")
    assert "--moe-backend" not in ours


def test_the_wide_ep_sidecar_ports_and_probes_are_llm_d_s(wide: RunResult) -> None:
    decode = pod_of(wide.one(LWS, "serve-dsr1-decode-leader-worker-set").inputs)
    theirs = llmd("wide-ep-lws/modelserver/gpu/vllm/base/decode.yaml")["spec"]["leaderWorkerTemplate"][
        "workerTemplate"
    ]["spec"]
    (their_sidecar,) = theirs["initContainers"]
    (ours,) = decode["spec"]["initContainers"]
    their_args = {a for a in their_sidecar["args"] if not a.startswith("--zap-log-level")}
    assert their_args <= set(ours["args"])
    assert [p["containerPort"] for p in ours["ports"]] == [p["containerPort"] for p in their_sidecar["ports"]]
    prefill = llmd("wide-ep-lws/modelserver/gpu/vllm/base/prefill.yaml")["spec"]["leaderWorkerTemplate"][
        "workerTemplate"
    ]["spec"]
    (their_vllm,) = prefill["containers"]
    vllm = container(pod_of(wide.one(LWS, "serve-dsr1-prefill-leader-worker-set").inputs))
    ports = {p["name"]: p["containerPort"] for p in their_vllm["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert vllm[probe]["httpGet"]["path"] == their_vllm[probe]["httpGet"]["path"]
        assert vllm[probe]["httpGet"]["port"] == ports[their_vllm[probe]["httpGet"]["port"]]
    values = llmd("wide-ep-lws/router/wide-ep-lws.values.yaml")["router"]["modelServers"]["targetPorts"]
    ours_values = wide.one("kubernetes:helm.sh/v4:Chart", "gateway-dsr1-epp").inputs["values"]["router"]
    assert ours_values["modelServers"]["targetPorts"] == values
