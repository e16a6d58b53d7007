"""What every example stack prints is true of that stack: one prefix per message kind, and no message
asks for a setting the stack file already has.

The engine prints each message with the prefix of its channel ("warning: ..." for a warning, info for
a note); a message that carries a kind of its own as well printed `warning: note: ...`. The render
shows each message as the engine does, with exactly one prefix, "note: " or "warning: ".
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from gke_gpu.core.gke_version import satisfies
from tests.conftest import stack_render
from tools.offline import ROOT, stacks

KINDS = ("note: ", "warning: ")
VERSION = re.compile(r"\b1\.\d+(?:\.\d+(?:-gke\.\d+)?)?\b")
# "set it to true", "set compactPlacement to true", "raise maxNodes to 3", "set `dcgm: exporter`"
ASKS = re.compile(
    r"\b(?:set|raise)\s+`?(?P<key>[A-Za-z][\w.]*|it)`?(?::\s*|\s+to\s+)`?(?P<value>[\w.\-]+)`?",
)
KEY_AT = re.compile(r"^(?:note|warning): gke-gpu:(?P<path>[\w.\[\]]+):")
# "warning: gke-gpu:cluster.dnsEndpointExternal: false: ..." (a warning about the key's own value)
WARNED_VALUE = re.compile(r"^warning: gke-gpu:(?P<path>[\w.\[\]]+): (?P<value>[\w.\-]+):")


def _stack_values(stack: str) -> dict[str, Any]:
    """The stack file's `gke-gpu:` values by dotted path (`gpuPools[0].compactPlacement`)."""
    text = (ROOT / f"Pulumi.{stack}.yaml").read_text(encoding="utf-8")
    config = (yaml.safe_load(text) or {}).get("config") or {}
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        flat[prefix] = value
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(f"{prefix}[{index}]", item)

    for key, value in config.items():
        if key.startswith("gke-gpu:"):
            walk(key.removeprefix("gke-gpu:"), value)
    return flat


def _asked_but_already_set(message: str, values: dict[str, Any]) -> list[str]:
    """The settings `message` asks for that `values` already holds."""
    found = []
    minimum = values.get("cluster.minimumVersion")
    if isinstance(minimum, str) and ("needs GKE" in message or "check the cluster's version" in message):
        asked = message.replace(f"minimumVersion {minimum}", "")  # the note echoes the stack's own
        named = VERSION.findall(asked)
        if named and all(satisfies(minimum, version) for version in named):
            found.append(f"cluster.minimumVersion {minimum} already meets {named}")
    where = KEY_AT.match(message)
    for ask in ASKS.finditer(message):
        key, value = ask.group("key"), ask.group("value")
        if key == "it" and where:
            path = where.group("path")
        elif where:
            path = f"{where.group('path').rsplit('.', 1)[0]}.{key}" if "." in where.group("path") else key
        else:
            path = key
        held = values.get(path)
        if held is not None and str(held).lower() == value.lower():
            found.append(f"{path} is already {held!r}")
    return found


@pytest.mark.parametrize("stack", stacks())
def test_every_message_has_one_prefix_of_its_kind(stack: str) -> None:
    for message in stack_render(stack).warnings:
        assert message.startswith(KINDS), message
        rest = message.split(": ", 1)[1]
        assert not rest.startswith(KINDS), f"doubled prefix: {message}"


@pytest.mark.parametrize("stack", stacks())
def test_no_example_stack_is_asked_for_what_it_already_sets(stack: str) -> None:
    values = _stack_values(stack)
    offending = {
        message: found
        for message in stack_render(stack).warnings
        if (found := _asked_but_already_set(message, values))
    }
    assert not offending, offending


def test_the_check_finds_a_message_asking_for_what_is_set() -> None:
    """The checker itself: the nvl72 note of 0033ada (a version its minimumVersion already meets) and
    an advice to set a key to the value the file has are found; advice the file does not follow is not."""
    values = {"cluster.minimumVersion": "1.35", "gpuPools[0].compactPlacement": True}
    old_nvl72 = (
        "note: gke-gpu:gpuPools[0]: GPUDirect-RDMA-A4X needs GKE at a version that offers A4X (minimum "
        "unpublished; cluster-toolkit's examples/gke-a4x pins 1.35); check the cluster's version on the "
        "REGULAR channel (minimumVersion 1.35)"
    )
    assert _asked_but_already_set(old_nvl72, values)
    asks_set = "warning: gke-gpu:gpuPools[0].compactPlacement: a GPUDirect pool without it; set it to true"
    assert _asked_but_already_set(asks_set, values) == ["gpuPools[0].compactPlacement is already True"]
    assert not _asked_but_already_set(asks_set, {"cluster.minimumVersion": "1.35"})
    assert not _asked_but_already_set("note: gke-gpu:x: needs GKE 1.36 or later", values)


def _warned_about_own_choice(message: str, values: dict[str, Any]) -> str | None:
    """The setting a `warning:` is about when the stack file sets it to the very value the warning
    quotes: a deliberate choice, which a note explains and a warning does not."""
    found = WARNED_VALUE.match(message)
    if found is None:
        return None
    held = values.get(found.group("path"))
    if held is not None and str(held).lower() == found.group("value").lower():
        return f"{found.group('path')}: {held!r}"
    return None


@pytest.mark.parametrize("stack", stacks())
def test_no_example_stack_is_warned_about_a_value_it_chose(stack: str) -> None:
    values = _stack_values(stack)
    offending = [m for m in stack_render(stack).warnings if _warned_about_own_choice(m, values)]
    assert not offending, offending


def test_prods_private_dns_endpoint_is_a_note_of_where_to_run_from() -> None:
    messages = stack_render("prod").warnings
    (dns,) = [m for m in messages if "dnsEndpointExternal" in m]
    assert dns == (
        "note: gke-gpu:cluster.dnsEndpointExternal: false: the DNS endpoint answers only requests from "
        "Google Cloud's networks, so `pulumi up` and kubectl must run there (docs/security.md)"
    )
    # The checker finds the warning this was.
    assert _warned_about_own_choice("warning: " + dns.removeprefix("note: "), _stack_values("prod"))
