"""The package schema (the API other languages see) is the reviewed golden file, valid, and served by
the plugin. A failure here is an API change: review the diff, then

    .venv/bin/python tools/schema.py --update
"""

import copy
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from gke_gpu import PUBLIC_COMPONENTS
from gke_gpu.core.package import PACKAGE
from tools import schema as package_schema

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    # SchemaError here names every component the analyzer refuses, with its error.
    return package_schema.generate()


def test_the_schema_matches_the_golden_file(current: dict[str, Any]) -> None:
    committed = package_schema.SCHEMA_PATH.read_text(encoding="utf-8")
    text = package_schema.serialize(current)
    assert text == committed, (
        f"the package schema changed (an API change):\n{package_schema.drift(committed, text)}\n"
        f"review it (CHANGELOG.md: what is breaking), then run: {package_schema.UPDATE_COMMAND}"
    )


def test_the_schema_is_valid_against_pulumis_metaschema(current: dict[str, Any]) -> None:
    assert package_schema.metaschema_errors(current) == []


def test_the_metaschema_check_finds_what_pulumi_would_refuse(current: dict[str, Any]) -> None:
    broken = copy.deepcopy(current)
    broken["name"] = "2bad name"
    broken["version"] = "0.9"
    token = next(iter(broken["resources"]))
    broken["resources"][token]["inputProperties"]["x"] = {"type": "strng"}
    errors = package_schema.metaschema_errors(broken)
    assert any(e.startswith("name: ") for e in errors), errors
    assert any(e.startswith("version: ") for e in errors), errors
    assert any(e.startswith(f"resources/{token}/inputProperties/x") for e in errors), errors


def test_a_null_description_is_read_as_pulumi_reads_it(current: dict[str, Any]) -> None:
    # The SDK writes `"description": null` for an enum member without a docstring; Pulumi's Go
    # reader makes it "" and omits it before validating. Any other non-string is still refused.
    token = next(iter(current["resources"]))
    with_null = copy.deepcopy(current)
    with_null["resources"][token]["description"] = None
    assert package_schema.metaschema_errors(with_null) == []
    with_number = copy.deepcopy(current)
    with_number["resources"][token]["description"] = 5
    assert package_schema.metaschema_errors(with_number) != []


def test_the_vendored_metaschema_is_the_recorded_file() -> None:
    data = package_schema.METASCHEMA_PATH.read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    source = (package_schema.METASCHEMA_PATH.parent / "SOURCE.md").read_text(encoding="utf-8")
    recorded = re.search(r"\| Git blob \| `([0-9a-f]{40})`", source)
    assert recorded and recorded.group(1) == blob, "pulumi.json differs from the file SOURCE.md describes"


def test_every_public_component_is_in_the_schema_and_nothing_else(current: dict[str, Any]) -> None:
    assert sorted(current["resources"]) == sorted(f"{PACKAGE}:index:{c}" for c in PUBLIC_COMPONENTS)
    assert all(r["isComponent"] for r in current["resources"].values())


def test_the_package_name_and_version_are_pinned(current: dict[str, Any]) -> None:
    assert current["name"] == PACKAGE
    assert current["version"] == package_schema.pinned_version()


def test_gpu_node_pool_requires_exactly_the_six_identity_and_capacity_inputs(current: dict[str, Any]) -> None:
    # A new required input breaks every caller in every language (a major version).
    pool = current["resources"][f"{PACKAGE}:index:GpuNodePool"]
    assert sorted(pool["requiredInputs"]) == [
        "accelerator",
        "clusterName",
        "gpusPerNode",
        "location",
        "maxNodes",
        "project",
    ]


def test_the_readme_reference_is_generated_from_the_golden_file() -> None:
    readme = package_schema.README_PATH.read_text(encoding="utf-8")
    section = package_schema.readme_section(readme)
    assert section is not None, "docs/components.md lost its component-reference markers"
    assert section == package_schema.markdown(package_schema.load_committed()), (
        f"docs/components.md is out of date: {package_schema.UPDATE_COMMAND}"
    )


def test_the_reference_lists_every_input_and_output_of_every_component() -> None:
    committed = package_schema.load_committed()
    section = package_schema.markdown(committed)
    for token, resource in committed["resources"].items():
        block = section.split(f"\n#### {token.rsplit(':', 1)[-1]}\n", 1)[1].split("\n#### ", 1)[0]
        for name in [*resource.get("inputProperties", {}), *resource.get("properties", {})]:
            assert f"| `{name}` |" in block, f"{token}: {name} missing from the reference"


def _pins(path: Path) -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return dict(line.split("==", 1) for line in lines if "==" in line)


def test_the_plugin_runs_the_sdk_the_program_pins() -> None:
    plugin = _pins(ROOT / "provider" / "requirements.txt")
    assert plugin == {"pulumi": _pins(ROOT / "requirements.txt")["pulumi"]}
