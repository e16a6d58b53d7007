"""The render document: what an offline run declares, as data and as files.

The JSON document (format ``gke-gpu-render/v1``) is what `tools/render.py --json` prints and what
`tests/golden/<stack>.json` holds. Each resource carries ``replaceOnChange``: the input paths whose
change makes the provider (and GKE) delete and recreate it, so a diff between two renders can say
REPLACE for the GPU pools a change would recreate. `--out` writes the document's Kubernetes objects as
YAML and its dashboard as JSON beside it. The tree view (`format_tree`, `format_header`) is in
`tools/plan_tree.py`, the diff (`diff`, `format_diff`) in `tools/plan_diff.py`; both are importable
from here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from gke_gpu.gpu.node_pool import REPLACE_ON_CHANGE as NODE_POOL_REPLACE_ON_CHANGE
from tools.offline import SECRET, RunResult
from tools.plan_diff import diff as diff
from tools.plan_diff import format_diff as format_diff
from tools.plan_tree import format_header as format_header
from tools.plan_tree import format_tree as format_tree

FORMAT = "gke-gpu-render/v1"

# Input paths (camelCase, dotted) that force replacement, per resource type. Sources: the
# terraform-provider-google schemas (ForceNew) that pulumi-gcp bridges, and the Kubernetes API
# (immutable fields). A path covers everything below it.
REPLACE_ON_CHANGE: dict[str, tuple[str, ...]] = {
    "gcp:container/nodePool:NodePool": NODE_POOL_REPLACE_ON_CHANGE,
    "gcp:container/cluster:Cluster": (
        "name",
        "location",
        "project",
        "network",
        "subnetwork",
        "networkingMode",
        "enableAutopilot",
        "ipAllocationPolicy",
        "datapathProvider",
        # Always declared false, which is what the provider records for every cluster without client
        # certificates: it never changes, but it is ForceNew.
        "masterAuth.clientCertificateConfig",
        "privateClusterConfig.masterIpv4CidrBlock",
        # Not listed: nodeConfig (the default pool's, ForceNew field by field: the cluster ignores it
        # after creation, so a new node service account replaces the node pools, not the cluster) and
        # clusterAutoscaling.autoProvisioningDefaults.serviceAccount (updated in place).
        # tests/test_replace_on_change.py checks the list against the provider's schema.
    ),
    "gcp:compute/network:Network": ("name", "project", "autoCreateSubnetworks", "routingMode"),
    "gcp:compute/subnetwork:Subnetwork": ("name", "project", "region", "network"),
    "gcp:compute/router:Router": ("name", "project", "region", "network"),
    "gcp:compute/routerNat:RouterNat": ("name", "project", "region", "router"),
    "gcp:serviceaccount/account:Account": ("accountId", "project"),
    "gcp:projects/iAMMember:IAMMember": ("project", "role", "member", "condition"),
    "gcp:monitoring/dashboard:Dashboard": ("project",),
    "gcp:monitoring/alertPolicy:AlertPolicy": ("project",),
    "kubernetes:batch/v1:Job": ("metadata.name", "metadata.namespace", "spec.template", "spec.selector"),
    "kubernetes:apps/v1:DaemonSet": ("metadata.name", "metadata.namespace", "spec.selector"),
    "kubernetes:apps/v1:Deployment": ("metadata.name", "metadata.namespace", "spec.selector"),
    "kubernetes:core/v1:Service": ("metadata.name", "metadata.namespace", "spec.clusterIP"),
}
# Any other Kubernetes object is replaced when its name or namespace changes.
_KUBERNETES_DEFAULT = ("metadata.name", "metadata.namespace")


class NotARenderError(ValueError):
    """A file given to --diff that is not a render document."""


# --------------------------------------------------------------------------------------------------
# Document.


def replace_on_change(type_token: str) -> tuple[str, ...]:
    if type_token in REPLACE_ON_CHANGE:
        return REPLACE_ON_CHANGE[type_token]
    if type_token.startswith("kubernetes:") and not type_token.startswith("pulumi:"):
        return _KUBERNETES_DEFAULT
    return ()


def to_document(result: RunResult) -> dict[str, Any]:
    stack_urns = {
        r.parent for r in result.resources if r.parent and r.parent.split("::")[2] == "pulumi:pulumi:Stack"
    }
    resources = []
    # Registration order depends on when each resource's inputs resolve: sort for stable output.
    for r in sorted(result.resources, key=lambda r: r.urn):
        parent = None if (r.parent is None or r.parent in stack_urns) else r.parent
        provider = r.provider.rsplit("::", 1)[0] if r.provider else None
        entry: dict[str, Any] = {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "parent": parent,
            "component": r.is_component,
        }
        if provider:
            entry["provider"] = provider
        entry["inputs"] = _sorted(r.inputs)
        forcing = replace_on_change(r.type)
        if forcing:
            entry["replaceOnChange"] = list(forcing)
        if r.ignore_changes:
            # What the program leaves to GCP after creation (gke_gpu/gpu/gke_rewrites.py says why).
            entry["ignoreChanges"] = list(r.ignore_changes)
        resources.append(entry)
    document: dict[str, Any] = {
        "format": FORMAT,
        "stack": result.stack,
        "resources": resources,
        "outputs": _sorted(result.outputs),
    }
    # Always present (possibly empty), so a reader of the JSON need not guess.
    document["warnings"] = list(result.warnings)
    # Local import: tools.cost reads the price table, which the diff and tree code do not need.
    from tools.cost import FORMAT as COST_FORMAT
    from tools.cost import estimate
    from tools.sample_cost import format_samples, sample_runs

    if result.outputs.get("clusterMode") == "existing":
        document["cost"] = {
            "format": COST_FORMAT,
            "error": None,
            "pools": [],
            "table": ["GPU cost estimate: none: the stack creates no GPU nodes (cluster.mode existing)"],
        }
    else:
        document["cost"] = estimate(document)
    samples = sample_runs(document)
    document["cost"]["samples"] = samples
    document["cost"]["table"] = [*document["cost"]["table"], *format_samples(samples)]
    document["preflight"] = preflight_of(document)
    return document


def preflight_of(document: dict[str, Any]) -> dict[str, Any]:
    """What the project must offer before `pulumi up` (gke_gpu.project): computed from the resources
    the render declares."""
    from gke_gpu.project.preflight import DeclaredResource, compute_preflight

    declared = [
        DeclaredResource(r["type"], r["name"], r["inputs"], r.get("provider"), r["urn"])
        for r in document["resources"]
        if not r["component"]
    ]
    project = document["outputs"].get("project")
    return compute_preflight(declared, default_project=project if isinstance(project, str) else "").to_json()


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def load_document(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotARenderError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotARenderError(f"{path} is not a render: not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise NotARenderError(
            f'{path} is not a render: expected a JSON object with "format": "{FORMAT}" '
            "(produce one with `python tools/render.py --stack <stack> --json`)"
        )
    return document


# --------------------------------------------------------------------------------------------------
# Files for reviewers and GitOps tools.


def kubernetes_objects(document: dict[str, Any]) -> list[dict[str, Any]]:
    objects = []
    for r in document["resources"]:
        if r["type"].startswith("kubernetes:") and not r["component"]:
            inputs = dict(r["inputs"])
            if r["type"] == "kubernetes:core/v1:Secret":
                # pulumi-kubernetes makes a Secret's whole data map one Pulumi secret: its keys are
                # hidden too, so the manifest shows a map with one placeholder entry.
                for key in ("data", "stringData"):
                    if inputs.get(key) == SECRET:
                        inputs[key] = {SECRET: SECRET}
            ordered = {k: inputs.pop(k) for k in ("apiVersion", "kind", "metadata") if k in inputs}
            ordered.update(inputs)
            objects.append(ordered)
    return objects


class _ManifestDumper(yaml.SafeDumper):
    """YAML for people: a multi-line string (a script in a ConfigMap) as a literal `|` block."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _represent_str)


def manifest_yaml(obj: Any) -> str:
    """A Kubernetes object as YAML, keys in order, multi-line strings as literal blocks."""
    return yaml.dump(obj, Dumper=_ManifestDumper, sort_keys=False, allow_unicode=True, width=110)


class OutDirError(ValueError):
    """An --out path the render must not write into."""


# What a render writes: it removes these (and only these) before writing a new render.
OWNED_FILES = ("render.json", "dashboard.json")
MANIFESTS = "manifests"


def check_out_dir(out: Path) -> None:
    """Raise OutDirError unless `out` is absent, an empty directory, or an earlier render's."""
    if not out.exists():
        return
    if not out.is_dir():
        raise OutDirError(f"--out {out}: exists and is not a directory; give a directory to write into")
    if not any(out.iterdir()):
        return
    render = out / "render.json"
    try:
        is_render = (
            render.is_file() and json.loads(render.read_text(encoding="utf-8")).get("format") == FORMAT
        )
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        is_render = False
    if not is_render:
        raise OutDirError(
            f"--out {out}: a directory that holds files but no earlier render (no {render.name} of "
            f"format {FORMAT}); give a new or empty directory, so no file of yours is overwritten"
        )


def write_out(document: dict[str, Any], out: Path) -> list[Path]:
    """Write manifests/*.yaml, dashboard.json and render.json under `out`, after removing the files
    an earlier render wrote there (so a manifest or dashboard that is gone does not linger).
    Raises OutDirError for a path that is a file or a directory of something else."""
    check_out_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    # render.json first (replaced, never removed): it marks the directory as a render's, so a run
    # that stops half-way still leaves a directory the next render may clean.
    render = out / "render.json"
    render.write_text(dumps(document), encoding="utf-8")
    written: list[Path] = [render]
    manifests = out / MANIFESTS
    for name in OWNED_FILES:
        if name != render.name:
            (out / name).unlink(missing_ok=True)
    if manifests.is_dir():
        for old in manifests.glob("*.yaml"):
            old.unlink()
    manifests.mkdir(exist_ok=True)
    for obj in kubernetes_objects(document):
        meta = obj.get("metadata", {})
        scope = meta.get("namespace") or "cluster"
        stem = re.sub(
            r"[^A-Za-z0-9._-]",
            "_",
            f"{scope}.{obj.get('kind', 'Object').lower()}.{meta.get('name', 'unnamed')}",
        )
        path = manifests / f"{stem}.yaml"
        # Objects of one namespace, kind and name on several clusters (a fleet's manager and workers
        # each through their own provider): every one gets its file, in the render's order.
        copy = 1
        while path in written:
            copy += 1
            path = manifests / f"{stem}.{copy}.yaml"
        path.write_text(manifest_yaml(obj), encoding="utf-8")
        written.append(path)
    for r in document["resources"]:
        if r["type"] == "gcp:monitoring/dashboard:Dashboard":
            path = out / "dashboard.json"
            path.write_text(
                json.dumps(json.loads(r["inputs"]["dashboardJson"]), indent=2) + "\n", encoding="utf-8"
            )
            written.append(path)
    return written
