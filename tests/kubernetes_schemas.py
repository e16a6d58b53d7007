"""Validate Kubernetes objects: built-in kinds against the real OpenAPI schemas of a current GKE
Kubernetes version (kubernetes-validate, strict: unknown fields fail), CRDs against the schemas in
tests/schemas: a published CRD schema vendored verbatim where one exists (see SOURCES.md), plus or
else shape schemas written from the published API references. An object must pass every schema
listed for its kind.

A vendored CRD manifest (a `.yaml` file under crds/) is read at first use: the openAPIV3Schema of
the version the object's apiVersion names, made as strict as the rest (see `_strict`)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import yaml
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

from tests import crd_cel

# GKE's REGULAR channel runs 1.34 as of 2026-11; the schemas ship with kubernetes-validate.
# kubernetes-validate reads and parses its schema files, the large _definitions.json among them, on
# every call (about 10 ms an object; 0.6 ms with them parsed once). The suite validates hundreds of
# objects, so the parsed files are kept for the session: validation only reads them.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)

KUBERNETES_VERSION = "1.34.0"
SCHEMAS = Path(__file__).parent / "schemas"
CRD_SCHEMAS: dict[tuple[str, str], tuple[str, ...]] = {
    ("cloud.google.com/v1", "ComputeClass"): (
        # GKE's CRD as published (datreeio/CRDs-catalog), then our stricter checks it lacks.
        "crds-catalog/cloud.google.com/computeclass_v1.json",
        "computeclass.cloud.google.com_v1.json",
    ),
    ("node.gke.io/v1", "GCPResourceAllowlist"): (
        # As published (datreeio/CRDs-catalog), then our checks it lacks.
        "crds-catalog/node.gke.io/gcpresourceallowlist_v1.json",
        "gcpresourceallowlist.node.gke.io_v1.json",
    ),
    ("datalayer.gke.io/v1", "GCPDataSource"): (
        # The schema published in datreeio/CRDs-catalog, then our stricter checks from GKE's pages.
        "crds-catalog/datalayer.gke.io/gcpdatasource_v1.json",
        "gcpdatasource.datalayer.gke.io_v1.json",
    ),
    ("monitoring.googleapis.com/v1", "PodMonitoring"): (
        # Managed Prometheus' CRD as published (GoogleCloudPlatform/prometheus-engine@2ffde4ec,
        # charts/operator/crds/), then our shape schema.
        "crds/monitoring.googleapis.com/monitoring.googleapis.com_podmonitorings.yaml",
        "podmonitoring.monitoring.googleapis.com_v1.json",
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ("servicemonitor.monitoring.coreos.com_v1.json",),
    # Published CRD manifests, vendored verbatim (see SOURCES.md): Kueue v0.19.2, JobSet v0.12.0.
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): (
        "crds/kueue.x-k8s.io/kueue.x-k8s.io_resourceflavors.yaml",
    ),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): ("crds/kueue.x-k8s.io/kueue.x-k8s.io_clusterqueues.yaml",),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): ("crds/kueue.x-k8s.io/kueue.x-k8s.io_localqueues.yaml",),
    ("kueue.x-k8s.io/v1beta2", "Topology"): ("crds/kueue.x-k8s.io/kueue.x-k8s.io_topologies.yaml",),
    ("kueue.x-k8s.io/v1beta2", "MultiKueueCluster"): (
        "crds/kueue.x-k8s.io/kueue.x-k8s.io_multikueueclusters.yaml",
    ),
    ("kueue.x-k8s.io/v1beta2", "MultiKueueConfig"): (
        "crds/kueue.x-k8s.io/kueue.x-k8s.io_multikueueconfigs.yaml",
    ),
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"): (
        "crds/kueue.x-k8s.io/kueue.x-k8s.io_admissionchecks.yaml",
    ),
    ("kueue.x-k8s.io/v1beta2", "ProvisioningRequestConfig"): (
        "crds/kueue.x-k8s.io/kueue.x-k8s.io_provisioningrequestconfigs.yaml",
    ),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): ("crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml",),
    # LeaderWorkerSet v0.10.0, the Helm chart's copy (what the chart installs).
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): (
        "crds/leaderworkerset.x-k8s.io/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    ),
    # GKE's multi-network CRDs (GoogleCloudPlatform/gke-networking-api@34c617f2, config/crds/).
    ("networking.gke.io/v1", "GKENetworkParamSet"): (
        "crds/networking.gke.io/networking.gke.io_gkenetworkparamsets.yaml",
    ),
    ("networking.gke.io/v1", "Network"): ("crds/networking.gke.io/networking.gke.io_networks.yaml",),
    # The Inference Gateway's objects: InferencePool from gateway-api-inference-extension v1.6.0,
    # Gateway and HTTPRoute from Gateway API v1.5.1's standard channel.
    ("inference.networking.k8s.io/v1", "InferencePool"): (
        "crds/inference.networking.k8s.io/inference.networking.k8s.io_inferencepools.yaml",
    ),
    ("gateway.networking.k8s.io/v1", "Gateway"): (
        "crds/gateway.networking.k8s.io/gateway.networking.k8s.io_gateways.yaml",
    ),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): (
        "crds/gateway.networking.k8s.io/gateway.networking.k8s.io_httproutes.yaml",
    ),
    # SIG Multicluster's ClusterProfile (kubernetes-sigs/cluster-inventory-api@8375ac21, the file of
    # tag v0.1.2; Kueue v0.19.2 builds against v0.1.3): what GKE's fleet keeps per member for MultiKueue.
    ("multicluster.x-k8s.io/v1alpha1", "ClusterProfile"): (
        "crds/multicluster.x-k8s.io/multicluster.x-k8s.io_clusterprofiles.yaml",
    ),
    # NVIDIA's DRA driver v0.4.0 (kubernetes-sigs/dra-driver-nvidia-gpu), the Helm chart's copy.
    ("resource.nvidia.com/v1beta1", "ComputeDomain"): (
        "crds/resource.nvidia.com/resource.nvidia.com_computedomains.yaml",
    ),
}
# Kubernetes' strict ObjectMeta (kubernetes-validate's, same version as the built-in kinds): a CRD's
# openAPIV3Schema leaves the top-level metadata a bare object.
_DEFINITIONS = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict/_definitions.json"
_OBJECT_META = (
    "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
)


@cache
def _crd_validator(filename: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(validator_schema(filename, "", ""))


def validator_schema(filename: str, api_version: str, kind: str) -> dict[str, Any]:
    """The JSON schema `validate` checks an object of this kind against: a vendored CRD manifest's
    openAPIV3Schema made strict, with Kubernetes' ObjectMeta; or a JSON schema file as it is. That
    each is a valid JSON schema is a test (tests/test_vendored_crds.py), not checked per process."""
    if not filename.endswith(".yaml"):
        loaded: dict[str, Any] = json.loads((SCHEMAS / filename).read_text())
        return loaded
    schema = _strict(crd_schema(filename, api_version, kind))
    schema["properties"]["metadata"] = {"$ref": _OBJECT_META}
    return schema


@cache
def crd_manifest(filename: str) -> dict[str, Any]:
    """A vendored CRD manifest (YAML), parsed once per session."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((SCHEMAS / filename).read_bytes(), Loader=loader)


def crd_schema(filename: str, api_version: str, kind: str) -> dict[str, Any]:
    """The published openAPIV3Schema of `api_version` in a vendored CRD manifest, unchanged."""
    crd = crd_manifest(filename)
    group, _, version = api_version.rpartition("/")
    spec = crd["spec"]
    assert (crd["kind"], spec["group"], spec["names"]["kind"]) == ("CustomResourceDefinition", group, kind), (
        filename
    )
    (served,) = [v for v in spec["versions"] if v["name"] == version and v["served"]]
    return served["schema"]["openAPIV3Schema"]


def _strict(node: dict[str, Any]) -> dict[str, Any]:
    """A copy of a structural schema node in which unknown fields fail, as they do for the built-in
    kinds (kubernetes-validate strict) and in the vendored ComputeClass schema (whose converter closes
    every object with properties but the root; here the root too): the API server prunes unknown
    fields of a custom resource, or refuses them under field validation Strict (kubectl's default),
    and either way they never take effect. An object schema that lists its properties, or lists none
    and has no additionalProperties (the API server keeps nothing of it), is closed unless it sets
    x-kubernetes-preserve-unknown-fields or already has an additionalProperties; only schema positions
    are walked (a field may be named "properties" or "items"). A pattern is made one Python's re
    reads the same way Go's RE2 does (see `_python_pattern`)."""
    out = dict(node)
    if isinstance(out.get("pattern"), str):
        out["pattern"] = _python_pattern(out["pattern"])
    if "properties" in out:
        out["properties"] = {name: _strict(child) for name, child in out["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [_strict(child) for child in out[key]]
    is_object = out.get("type") == "object" or "properties" in out
    if (
        is_object
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _python_pattern(pattern: str) -> str:
    """RE2 (the API server's) accepts inline flags after `^`, as in Kueue's AdmissionCheck
    `^(?i)[a-z]...$`; Python's re wants global flags first. Same meaning, flags moved to the front."""
    return re.sub(r"^\^\(\?([ims]+)\)", r"(?\1)^", pattern)


@cache
def _definitions_registry() -> Registry:
    return Resource.from_contents(schema_contents(_DEFINITIONS, KUBERNETES_VERSION)) @ Registry()


@cache
def _crd_manifest_validator(filename: str, api_version: str, kind: str) -> jsonschema.Draft202012Validator:
    schema = validator_schema(filename, api_version, kind)
    return jsonschema.Draft202012Validator(schema, registry=_definitions_registry())


@cache
def cel_rules(filename: str, api_version: str, kind: str) -> crd_cel._Node | None:
    """The CEL validation rules of the schema in `filename` for this kind, compiled once per session;
    None where the schema has none. A vendored CRD manifest's schema is the apiVersion's own; a
    JSON file is the schema itself (our own checks hold no rules)."""
    if filename.endswith(".yaml"):
        schema = crd_schema(filename, api_version, kind)
    else:
        schema = json.loads((SCHEMAS / filename).read_text())
    return crd_cel.compile_schema(schema, filename) if crd_cel.has_rules(schema) else None


def cel_outcome(obj: dict[str, Any]) -> list[crd_cel.Outcome]:
    """The CEL rules of every schema listed for the object's kind, evaluated over it."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return []
    outcomes = []
    for filename in CRD_SCHEMAS.get((api_version, kind), ()):
        node = cel_rules(filename, api_version, kind)
        if node is not None:
            outcomes.append(crd_cel.evaluate(obj, node))
    return outcomes


def validate(obj: dict[str, Any]) -> None:
    """Raise AssertionError naming the object and the first schema error, or every CEL validation rule
    of its CRD that it breaks (crd_cel.py: evaluated as the API server does at create)."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    name = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
    if key in CRD_SCHEMAS:
        for filename in CRD_SCHEMAS[key]:
            if filename.endswith(".yaml"):
                validator = _crd_manifest_validator(filename, *key)
            else:
                validator = _crd_validator(filename)
            errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
            if errors:
                raise AssertionError(f"{name}: {errors[0].message} at {list(errors[0].path)} ({filename})")
        broken = [failure for outcome in cel_outcome(obj) for failure in outcome.failures]
        if broken:
            raise AssertionError(f"{name}: breaks its CRD's CEL validation rules: {'; '.join(broken)}")
        return
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError(f"{name}: {exc.message} at {list(exc.path)}") from None
    except kubernetes_validate.SchemaNotFoundError as exc:
        raise AssertionError(f"{name}: no schema for {key} ({exc}); add one to tests/schemas") from None
