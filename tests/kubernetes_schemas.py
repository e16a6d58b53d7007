"""Validate Kubernetes objects: built-in kinds against the real OpenAPI schemas of a current GKE
Kubernetes version (kubernetes-validate, strict: unknown fields fail), CRDs against the schemas in
tests/schemas: a published CRD schema vendored verbatim where one exists (see SOURCES.md), plus or
else shape schemas written from the published API references. An object must pass every schema
listed for its kind."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

# GKE's REGULAR channel runs 1.34 as of 2026-11; the schemas ship with kubernetes-validate.
KUBERNETES_VERSION = "1.34.0"
SCHEMAS = Path(__file__).parent / "schemas"
CRD_SCHEMAS: dict[tuple[str, str], tuple[str, ...]] = {
    ("cloud.google.com/v1", "ComputeClass"): (
        # GKE's CRD as published (datreeio/CRDs-catalog), then our stricter checks it lacks.
        "crds-catalog/cloud.google.com/computeclass_v1.json",
        "computeclass.cloud.google.com_v1.json",
    ),
    ("monitoring.googleapis.com/v1", "PodMonitoring"): ("podmonitoring.monitoring.googleapis.com_v1.json",),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ("servicemonitor.monitoring.coreos.com_v1.json",),
}


@cache
def _crd_validator(filename: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / filename).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(obj: dict[str, Any]) -> None:
    """Raise AssertionError naming the object and the first schema error."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    name = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
    if key in CRD_SCHEMAS:
        for filename in CRD_SCHEMAS[key]:
            errors = sorted(_crd_validator(filename).iter_errors(obj), key=lambda e: list(e.path))
            if errors:
                raise AssertionError(f"{name}: {errors[0].message} at {list(errors[0].path)} ({filename})")
        return
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError(f"{name}: {exc.message} at {list(exc.path)}") from None
    except kubernetes_validate.SchemaNotFoundError as exc:
        raise AssertionError(f"{name}: no schema for {key} ({exc}); add one to tests/schemas") from None
