"""No credential is ever echoed (issue 24, item 7): a token pasted into any key of the stack file, or into a
component's args, is refused by its kind and length; no error, note or render repeats it."""

from __future__ import annotations

import json
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from gke_gpu.core.common import ConfigError, cut
from gke_gpu.core.credentials import credential_kind, redact
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpu.node_pool import GpuNodePool
from gke_gpu.serving.inference_service import InferenceService
from gke_gpu.stack.config import settings_from_config
from gke_gpu.stack.stack_file import StackFileError
from gke_gpu.stack.stack_model import StackConfig
from tests.conftest import L4_POOL, STANDARD_CLUSTER, service_args, stack_config
from tests.hang_guard import no_hang
from tools.offline import run_program

# One token of each shape, made up (each built from parts, so that no scanner mistakes this file for a
# leak), with the kind a message names instead.
TOKENS = {
    "Hugging Face token": "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f",
    "GitHub token": "ghp_" + "1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
    "GitHub token (fine-grained)": "github_pat_"
    + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789AB",
    "Google API key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "Google OAuth token": "ya29." + "a0AfB_byC1d2E3f4G5h6I7j8K9l0M1n2O3p4Q5r6S7t8U9v0W",
    "bearer token": "Bearer " + "sk0123456789abcdefABCDEF0123456789",
    "PEM private key": "-----BEGIN "
    + "PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    "JSON Web Token": "eyJ"
    + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
# The part of each that must never appear (a message may say "Bearer", never the token after it).
SECRET_PART = {kind: token.split()[-1] if kind == "bearer token" else token for kind, token in TOKENS.items()}
SECRET_PART["PEM private key"] = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"


def string_keys(annotation: Any, loc: tuple[Any, ...] = ()) -> set[tuple[Any, ...]]:
    """Every location in the stack file's schema that takes a string (a list's item is index 0, a
    map's key `<key>` and its value `<value>`)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return string_keys(args[0], loc)
    if origin in (Union, types.UnionType):
        return set().union(*(string_keys(a, loc) for a in args if a is not type(None)))
    if origin is Literal:
        return {loc} if any(isinstance(a, str) for a in args) else set()
    if origin in (list, tuple):
        return set().union(*(string_keys(a, (*loc, 0)) for a in args if a is not Ellipsis))
    if origin is dict:
        return {(*loc, "<key>")} | string_keys(args[1], (*loc, "<value>"))
    if annotation is str or annotation is typing.Any:
        return {loc}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found: set[tuple[Any, ...]] = set()
        for name, field in annotation.model_fields.items():
            found |= string_keys(field.annotation, (*loc, field.alias or name))
        return found
    return set()


STACK_STRING_KEYS = sorted(string_keys(StackConfig), key=str)
BASE = {
    "cluster": {**STANDARD_CLUSTER, "masterAuthorizedNetworks": [{"cidrBlock": "10.0.0.0/8"}]},
    "gpuPools": [{**L4_POOL, "driverVersion": "LATEST", "labels": {"team": "a"}}],
    "serving": [{"name": "chat", "pool": "l4", "model": "gs://models-bucket/qwen"}],
    "workloads": [{"name": "nvidia-smi", "pool": "l4"}],
}


def with_value(raw: dict[str, Any], loc: tuple[Any, ...], value: str) -> dict[str, Any]:
    """`raw` with `value` at `loc`, the maps and lists on the way made where missing."""
    raw = json.loads(json.dumps(raw))
    node: Any = raw
    for i, part in enumerate(loc):
        if part == "<key>":
            node[value] = "x"
            break
        key = "key" if part == "<value>" else part
        if i == len(loc) - 1:
            if isinstance(key, int):
                node[:] = [value]
            else:
                node[key] = value
            break
        kind = list if isinstance(loc[i + 1], int) else dict
        if isinstance(key, int):
            if not node or not isinstance(node[0], kind):
                node[:] = [kind()]
            node = node[0]
        else:
            if not isinstance(node.get(key), kind):
                node[key] = kind()
            node = node[key]
    return raw


def problems_for(raw: dict[str, Any]) -> str:
    config = {f"gke-gpu:{key}": json.dumps(value) for key, value in raw.items()}
    config |= {"gcp:project": "test-project", "gcp:region": "us-central1"}
    with pytest.raises((ConfigError, StackFileError)) as info:
        settings_from_config(config, stack="test", secret_keys=frozenset())
    return str(info.value)


def test_every_string_key_of_the_schema_is_walked() -> None:
    # The walk reaches every section, nested models, lists and maps (guards the walk itself).
    assert {loc[0] for loc in STACK_STRING_KEYS} >= {
        "cluster", "gpuPools", "serving", "workloads", "batch", "monitoring", "network", "devicePlugin"
    }  # fmt: skip
    assert ("serving", 0, "hfTokenSecret") in STACK_STRING_KEYS
    assert ("gpuPools", 0, "labels", "<value>") in STACK_STRING_KEYS
    assert len(STACK_STRING_KEYS) > 50


@pytest.mark.parametrize("kind", list(TOKENS))
def test_a_token_in_any_stack_key_is_refused_and_never_echoed(kind: str) -> None:
    token, secret = TOKENS[kind], SECRET_PART[kind]
    for loc in STACK_STRING_KEYS:
        message = problems_for(with_value(BASE, loc, token))  # refused: nothing renders it
        assert secret not in message, (loc, message)


@pytest.mark.parametrize("kind", list(TOKENS))
def test_a_token_in_a_valid_value_is_refused_by_its_kind_and_length(kind: str) -> None:
    # A label value takes `hf_...` as it stands (letters, digits, '_'): refused all the same.
    token = TOKENS[kind]
    message = problems_for(with_value(BASE, ("gpuPools", 0, "labels", "<value>"), token))
    assert kind.split(" (")[0] in message and SECRET_PART[kind] not in message
    assert message.count("\n  - ") == 1  # the shape's problem or the credential's, never both


def test_a_hugging_face_token_in_a_label_says_what_to_do() -> None:
    token = TOKENS["Hugging Face token"]
    message = problems_for(with_value(BASE, ("gpuPools", 0, "labels", "<value>"), token))
    assert message.endswith(
        "gke-gpu:gpuPools[0].labels.key: holds what looks like a Hugging Face token (37 characters, not "
        "shown); a stack file's plain values are printed in previews, logs and renders: keep a credential "
        "in a Kubernetes Secret (serving's hfTokenSecret names one) or a Pulumi secret read by its own key"
    )
    assert message.count("\n  - ") == 1  # one problem: no follow-on


def test_a_token_in_hf_token_secret_says_it_takes_a_secrets_name_and_how_to_make_one() -> None:
    token = TOKENS["Hugging Face token"]
    raw = with_value(BASE, ("serving", 0, "model"), "Qwen/Qwen2.5-7B-Instruct")
    message = problems_for(with_value(raw, ("serving", 0, "hfTokenSecret"), token))
    assert token not in message and "expected the expected format" not in message
    line = next(line for line in message.splitlines() if "hfTokenSecret" in line)
    assert "[Hugging Face token, 37 characters, not shown]" in line
    assert "the name of a Kubernetes Secret" in line and "kubectl create secret generic" in line
    assert message.count("\n  - ") == 1  # the shape's problem only, not a second credential line


@pytest.mark.parametrize("kind", list(TOKENS))
def test_a_token_through_the_whole_program_reaches_no_output(kind: str) -> None:
    token, secret = TOKENS[kind], SECRET_PART[kind]
    raw = dict(BASE)
    for loc in STACK_STRING_KEYS:
        raw = with_value(raw, loc, token)
    result = run_program(stack_config(**raw))
    everything = json.dumps(
        [str(result.error), result.warnings, result.outputs, [r.inputs for r in result.resources]]
    )
    assert result.error is not None and secret not in everything


@pytest.mark.parametrize("kind", list(TOKENS))
def test_a_token_in_a_components_args_is_never_echoed(kind: str) -> None:
    token, secret = TOKENS[kind], SECRET_PART[kind]
    service = service_args()
    pool = {
        "project": "p-123456",
        "location": "us-central1",
        "cluster_name": "gpu",
        "accelerator": "nvidia-l4",
    }
    cases: list[tuple[Any, dict[str, Any]]] = [
        (InferenceService, {**service, key: token})
        for key in ("model", "hf_token_secret", "project", "cluster_name", "name", "server", "scale_on")
    ]
    cases += [
        (GpuNodePool, {**pool, key: token}) for key in ("project", "location", "cluster_name", "machine_type")
    ]
    cases += [(GpuNodePool, {**pool, "labels": {token: token}})]
    for component, args in cases:
        with pytest.raises(InvalidArgsError) as info:
            component.check_args("web", args)
        assert secret not in str(info.value) and secret not in repr(info.value.errors), (
            args,
            str(info.value),
        )
    with pytest.raises(InvalidArgsError) as info:
        InferenceService.check_args(token, {**service, "hf_token_secret": token})
    assert secret not in str(info.value)


@pytest.mark.parametrize("kind", list(TOKENS))
def test_redaction_shows_kind_and_length(kind: str) -> None:
    token = TOKENS[kind]
    assert credential_kind(f"prefix {token} suffix") == kind.split(" (")[0]
    assert SECRET_PART[kind] not in redact(f"x {token} y")
    assert SECRET_PART[kind] not in cut(token) and SECRET_PART[kind] not in cut(f"a long text {token}", 20)


def test_plain_values_are_left_alone() -> None:
    for text in ("hf-token", "hf_team", "gs://models-bucket/qwen", "Qwen/Qwen2.5-7B-Instruct", "ghp_short"):
        assert credential_kind(text) is None and redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "eyJ" * 70_000,
        "hf_" * 70_000,
        "ghp_" * 50_000,
        "Bearer " * 30_000,
        "-----BEGIN PRIVATE KEY-----" * 8_000,
    ],
    ids=["jwt", "hf", "github", "bearer", "pem"],
)
def test_redaction_stays_linear_on_hostile_text(text: str) -> None:
    # Every message passes through redact: a value built to make a pattern backtrack must not hang it.
    with no_hang():
        redact(text)
        credential_kind(text)
