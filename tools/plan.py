"""The render document: what an offline run declares, as data, as a tree, as files, and as a diff.

The JSON document (format ``gke-gpu-render/v1``) is what `tools/render.py --json` prints and what
`tests/golden/<stack>.json` holds. Each resource carries ``replaceOnChange``: the input paths whose
change makes the provider (and GKE) delete and recreate it, so a diff between two renders can say
REPLACE for the GPU pools a change would recreate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gke_gpu.gpu.node_pool import REPLACE_ON_CHANGE as NODE_POOL_REPLACE_ON_CHANGE
from tools.offline import UNKNOWN, RunResult

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
        # Not listed: enablePrivateEndpoint (in place since provider v4.80) and
        # masterAuth.clientCertificateConfig (ForceNew, but always declared false, which is what the
        # provider records for every cluster without client certificates: it never changes).
        "privateClusterConfig.masterIpv4CidrBlock",
        "clusterAutoscaling.autoProvisioningDefaults.serviceAccount",
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
    return document


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
# Tree view.

Summary = Callable[[dict[str, Any]], list[str]]


def _get(data: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return default
        if data is None:
            return default
    return data


def _node_pool_summary(i: dict[str, Any]) -> list[str]:
    nc = i.get("nodeConfig", {})
    lines = [
        f"machineType={nc.get('machineType')} image={nc.get('imageType')} "
        f"disk={nc.get('diskSizeGb')}GB {nc.get('diskType')}"
    ]
    for acc in nc.get("guestAccelerators") or []:
        driver = _get(acc, "gpuDriverInstallationConfig.gpuDriverVersion")
        text = f"gpu={acc.get('type')} x{acc.get('count')} driver={driver}"
        if acc.get("gpuPartitionSize"):
            text += f" mig={acc['gpuPartitionSize']}"
        if acc.get("gpuSharingConfig"):
            sc = acc["gpuSharingConfig"]
            text += f" sharing={sc.get('gpuSharingStrategy')}/{sc.get('maxSharedClientsPerGpu')}"
        lines.append(text)
    auto = i.get("autoscaling", {})
    zones = ",".join(i.get("nodeLocations") or []) or "cluster default"
    lines.append(
        f"nodes={auto.get('totalMinNodeCount')}..{auto.get('totalMaxNodeCount')} "
        f"policy={auto.get('locationPolicy')} zones={zones}"
    )
    extras = [f"spot={str(nc.get('spot', False)).lower()}"]
    reservation = _get(nc, "reservationAffinity.consumeReservationType")
    if reservation:
        names = _get(nc, "reservationAffinity.values", [])
        extras.append(f"reservation={reservation}" + (f":{','.join(names)}" if names else ""))
    if i.get("queuedProvisioning"):
        extras.append("queuedProvisioning")
    if nc.get("flexStart"):
        run = nc.get("maxRunDuration")
        extras.append("flexStart" + (f"/{run}" if run else ""))
    if i.get("placementPolicy"):
        extras.append(f"placement={_get(i, 'placementPolicy.type')}")
    local_ssds = _get(nc, "ephemeralStorageLocalSsdConfig.localSsdCount")
    if local_ssds:
        extras.append(f"localSsd={local_ssds}")
    for disk in nc.get("secondaryBootDisks") or []:
        extras.append(f"imageCache={disk.get('diskImage')}")
    lines.append(" ".join(extras))
    nics = _get(i, "networkConfig.additionalNodeNetworkConfigs", [])
    if nics:
        lines.append(f"extraNics={len(nics)} (GPUDirect)")
    taints = [f"{t.get('key')}={t.get('value')}:{t.get('effect')}" for t in nc.get("taints") or []]
    if taints:
        lines.append("taints=" + ",".join(taints))
    return lines


_DNS_EXTERNAL = "controlPlaneEndpointsConfig.dnsEndpointConfig.allowExternalTraffic"


def _cluster_summary(i: dict[str, Any]) -> list[str]:
    mode = "autopilot" if i.get("enableAutopilot") else "standard"
    components = ",".join(_get(i, "monitoringConfig.enableComponents", []))
    lines = [
        f"name={i.get('name')} mode={mode} location={i.get('location')} "
        f"channel={_get(i, 'releaseChannel.channel')}",
        f"privateNodes={_get(i, 'privateClusterConfig.enablePrivateNodes')} "
        f"authorizedNetworks={len(_get(i, 'masterAuthorizedNetworksConfig.cidrBlocks', []))} "
        f"deletionProtection={i.get('deletionProtection')}",
        f"ipEndpoint={'private' if _get(i, 'privateClusterConfig.enablePrivateEndpoint') else 'public'} "
        f"dnsEndpoint={'on' if _get(i, _DNS_EXTERNAL) else 'off'} "
        f"binaryAuthorization={_get(i, 'binaryAuthorization.evaluationMode', 'DISABLED')}",
        f"monitoring={components} managedPrometheus={_get(i, 'monitoringConfig.managedPrometheus.enabled')}",
    ]
    if mode == "standard":
        lines.append(
            f"workloadIdentity={_get(i, 'workloadIdentityConfig.workloadPool')} "
            f"shieldedNodes={i.get('enableShieldedNodes')} "
            f"removeDefaultNodePool={i.get('removeDefaultNodePool')}"
        )
        lines.append(
            f"dataplane={i.get('datapathProvider')} multiNetworking={bool(i.get('enableMultiNetworking'))}"
        )
    return lines


def _k8s_summary(i: dict[str, Any]) -> list[str]:
    meta = i.get("metadata", {})
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    lines = [f"{i.get('kind')} {where}{meta.get('name')}"]
    pod = _get(i, "spec.template.spec") or _get(i, "spec.jobTemplate.spec.template.spec")
    if isinstance(pod, dict):
        for c in pod.get("containers") or []:
            gpus = _get(c, "resources.limits", {}).get("nvidia.com/gpu")
            lines.append(f"container {c.get('name')}: {c.get('image')}" + (f" gpu={gpus}" if gpus else ""))
        if pod.get("nodeSelector"):
            lines.append("nodeSelector=" + ",".join(f"{k}={v}" for k, v in pod["nodeSelector"].items()))
    lines.extend(_kueue_summary(i))
    return lines


def _kueue_summary(i: dict[str, Any]) -> list[str]:
    """A Kueue queue's quota, cohort and borrowing; a LocalQueue's ClusterQueue; a flavor's topology."""
    kind, spec = i.get("kind"), i.get("spec") or {}
    if not str(i.get("apiVersion", "")).startswith("kueue.x-k8s.io/") or not isinstance(spec, dict):
        return []
    if kind == "LocalQueue":
        return [f"clusterQueue={spec.get('clusterQueue')}"]
    if kind == "ResourceFlavor":
        return [f"topology={spec['topologyName']}"] if spec.get("topologyName") else []
    if kind == "Topology":
        return ["levels=" + ",".join(str(level.get("nodeLabel")) for level in spec.get("levels", []))]
    if kind != "ClusterQueue":
        return []
    quota, borrow = [], []
    for group in spec.get("resourceGroups", []):
        for flavor in group.get("flavors", []):
            for r in flavor.get("resources", []):
                quota.append(f"{r.get('name')}={r.get('nominalQuota')}")
                if r.get("name") == "nvidia.com/gpu":
                    borrow.append(str(r.get("borrowingLimit", "any idle")))
    if "namespaceSelector" not in spec:
        selector = "none"
    else:
        names = [
            v
            for e in _get(spec, "namespaceSelector.matchExpressions", [])
            if e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "In"
            for v in e.get("values", [])
        ]
        selector = ",".join(names) if names else ("any" if spec["namespaceSelector"] == {} else "selected")
    lines = ["quota " + " ".join(quota)]
    if spec.get("cohortName"):
        lines.append(
            f"cohort={spec['cohortName']} mayBorrowGpus={','.join(borrow)} "
            f"reclaim={_get(spec, 'preemption.reclaimWithinCohort')} namespaces={selector}"
        )
    return lines


def _generic_summary(i: dict[str, Any]) -> list[str]:
    scalars = [f"{k}={_short(v)}" for k, v in i.items() if not isinstance(v, (dict, list))]
    return [" ".join(scalars[:6])] if scalars else []


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


_SUMMARIES: dict[str, Summary] = {
    "gcp:container/nodePool:NodePool": _node_pool_summary,
    "gcp:container/cluster:Cluster": _cluster_summary,
}


def _summary(resource: dict[str, Any]) -> list[str]:
    if resource["component"]:
        return []
    inputs = resource["inputs"]
    if resource["type"] in _SUMMARIES:
        return _SUMMARIES[resource["type"]](inputs)
    if resource["type"].startswith("kubernetes:"):
        return _k8s_summary(inputs)
    if resource["type"] == "gcp:monitoring/dashboard:Dashboard":
        return [f"dashboard {json.loads(inputs['dashboardJson']).get('displayName')!r}"]
    return _generic_summary(inputs)


def format_tree(document: dict[str, Any]) -> str:
    resources = document["resources"]
    children: dict[str | None, list[dict[str, Any]]] = {}
    for r in resources:
        children.setdefault(r["parent"], []).append(r)
    custom = [r for r in resources if not r["component"]]
    lines = [
        f"stack {document['stack']}: {len(custom)} resources in "
        f"{len(resources) - len(custom)} components ({UNKNOWN} = computed by GCP)",
        *format_header(document),
        "",
    ]

    def walk(parent: str | None, prefix: str) -> None:
        items = children.get(parent, [])
        for index, r in enumerate(items):
            last = index == len(items) - 1
            branch, cont = ("└─ ", "   ") if last else ("├─ ", "│  ")
            lines.append(f"{prefix}{branch}{r['name']}  [{r['type']}]")
            for text in _summary(r):
                lines.append(f"{prefix}{cont}    {text}")
            walk(r["urn"], prefix + cont)

    walk(None, "")
    lines.append("")
    lines.append("outputs:")
    for key, value in document["outputs"].items():
        lines.append(f"  {key}: {_short(value) if not isinstance(value, (dict, list)) else ''}")
        if isinstance(value, (dict, list)):
            for text in yaml.safe_dump(value, sort_keys=False, width=200).splitlines():
                lines.append(f"    {text}")
    cost = document.get("cost")
    if cost:
        lines.append("")
        lines.extend(cost.get("table", []))
    return "\n".join(lines)


def format_header(document: dict[str, Any]) -> list[str]:
    """What must not scroll away: the program's warnings, then the policy pack's verdict."""
    lines = [f"warning: {warning}" for warning in document.get("warnings") or []]
    policy = document.get("policy")
    if isinstance(policy, dict):
        if not policy.get("checked"):
            lines.append(f"policy check skipped: {policy.get('reason')}")
        else:
            lines.append(str(policy.get("summary")))
            for v in policy.get("violations") or []:
                level = "MANDATORY" if v.get("enforcementLevel") == "mandatory" else "advisory"
                where = f"{v.get('resource')} [{v.get('type')}]"
                lines.append(f"  - {level} {where}: {v.get('policy')}: {v.get('message')}")
    return lines


# --------------------------------------------------------------------------------------------------
# Files for reviewers and GitOps tools.


def kubernetes_objects(document: dict[str, Any]) -> list[dict[str, Any]]:
    objects = []
    for r in document["resources"]:
        if r["type"].startswith("kubernetes:") and not r["component"]:
            inputs = dict(r["inputs"])
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
        filename = f"{scope}.{obj.get('kind', 'Object').lower()}.{meta.get('name', 'unnamed')}.yaml"
        path = manifests / re.sub(r"[^A-Za-z0-9._-]", "_", filename)
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


# --------------------------------------------------------------------------------------------------
# Diff between two renders.


@dataclass
class ResourceDiff:
    urn: str
    type: str
    name: str
    status: str  # "create" | "delete" | "update" | "replace"
    changes: list[tuple[str, Any, Any, bool]]  # (path, old, new, forces replacement)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def _forces(path: str, forcing: Iterable[str]) -> bool:
    plain = re.sub(r"\[\d+\]", "", path)
    return any(plain == f or plain.startswith(f + ".") for f in forcing)


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[ResourceDiff]:
    old_by = {r["urn"]: r for r in old["resources"] if not r["component"]}
    new_by = {r["urn"]: r for r in new["resources"] if not r["component"]}
    result: list[ResourceDiff] = []
    for urn, r in new_by.items():
        if urn not in old_by:
            result.append(ResourceDiff(urn, r["type"], r["name"], "create", []))
            continue
        before, after = _flatten(old_by[urn]["inputs"]), _flatten(r["inputs"])
        forcing = r.get("replaceOnChange", [])
        changes = [
            (path, before.get(path), after.get(path), _forces(path, forcing))
            for path in sorted(set(before) | set(after))
            if before.get(path) != after.get(path)
        ]
        if changes:
            status = "replace" if any(c[3] for c in changes) else "update"
            result.append(ResourceDiff(urn, r["type"], r["name"], status, changes))
    for urn, r in old_by.items():
        if urn not in new_by:
            result.append(ResourceDiff(urn, r["type"], r["name"], "delete", []))
    return result


def format_diff(changes: list[ResourceDiff]) -> str:
    if not changes:
        return "no changes"
    marks = {"create": "+ CREATE ", "delete": "- DELETE ", "update": "~ UPDATE ", "replace": "! REPLACE"}
    lines = []
    for c in sorted(changes, key=lambda c: ("replace", "delete", "update", "create").index(c.status)):
        lines.append(f"{marks[c.status]} {c.name} [{c.type}]")
        for path, before, after, forces in c.changes:
            flag = "  (forces replacement)" if forces else ""
            lines.append(f"      {path}: {_short(before)} -> {_short(after)}{flag}")
    counts = {s: sum(1 for c in changes if c.status == s) for s in ("replace", "delete", "update", "create")}
    lines.append(", ".join(f"{n} to {s}" for s, n in counts.items() if n))
    return "\n".join(lines)
