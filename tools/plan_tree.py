"""The render document as a tree for people: each resource under its parent, with the key settings of
GPU node pools, clusters, Kubernetes objects (containers, GPUs, Kueue quotas) and dashboards (a few
scalar inputs of any other), then the stack outputs and the cost table.

What must not scroll away comes first (`format_header`): the program's warnings, then the policy
pack's verdict. This is `tools/render.py`'s default output, `pulumi preview`'s offline twin.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from tools.offline import UNKNOWN

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
        f"dnsEndpoint={'external' if _get(i, _DNS_EXTERNAL) else 'google-cloud-only'} "
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


def _k8s_summary(i: dict[str, Any], cohort_gpus: dict[str, int] | None = None) -> list[str]:
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
    lines.extend(_kueue_summary(i, cohort_gpus or {}))
    return lines


def _gpu_quota(spec: dict[str, Any]) -> int:
    """A ClusterQueue's nominal nvidia.com/gpu quota (0 when it has none, or not a whole number)."""
    total = 0
    for group in spec.get("resourceGroups", []):
        for flavor in group.get("flavors", []):
            for r in flavor.get("resources", []):
                if r.get("name") == "nvidia.com/gpu" and isinstance(r.get("nominalQuota"), int):
                    total += r["nominalQuota"]
    return total


def cohort_gpus(resources: list[dict[str, Any]]) -> dict[str, int]:
    """Each Kueue cohort's GPUs: the nominal quotas of its ClusterQueues added up."""
    totals: dict[str, int] = {}
    for r in resources:
        spec = r["inputs"].get("spec") if r["type"].endswith(":ClusterQueue") else None
        if isinstance(spec, dict) and spec.get("cohortName"):
            totals[spec["cohortName"]] = totals.get(spec["cohortName"], 0) + _gpu_quota(spec)
    return totals


def _kueue_summary(i: dict[str, Any], cohort_gpus: dict[str, int]) -> list[str]:
    """A Kueue queue's quota, cohort and borrowing; a LocalQueue's ClusterQueue; a flavor's topology.
    Without a borrowing limit a queue may borrow every GPU the rest of its cohort holds: that number,
    as the stack output's `mayBorrowGpus` says it."""
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
                if r.get("name") == "nvidia.com/gpu" and "borrowingLimit" in r:
                    borrow.append(str(r["borrowingLimit"]))
                elif r.get("name") == "nvidia.com/gpu":
                    others = cohort_gpus.get(spec.get("cohortName", ""), 0) - _gpu_quota(spec)
                    borrow.append(f"{others} (any idle)" if spec.get("cohortName") else "any idle")
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


def _summary(resource: dict[str, Any], cohorts: dict[str, int] | None = None) -> list[str]:
    if resource["component"]:
        return []
    inputs = resource["inputs"]
    if resource["type"] in _SUMMARIES:
        return _SUMMARIES[resource["type"]](inputs)
    if resource["type"].startswith("kubernetes:"):
        return _k8s_summary(inputs, cohorts)
    if resource["type"] == "gcp:monitoring/dashboard:Dashboard":
        return [f"dashboard {json.loads(inputs['dashboardJson']).get('displayName')!r}"]
    return _generic_summary(inputs)


def format_tree(document: dict[str, Any]) -> str:
    resources = document["resources"]
    children: dict[str | None, list[dict[str, Any]]] = {}
    for r in resources:
        children.setdefault(r["parent"], []).append(r)
    custom = [r for r in resources if not r["component"]]
    cohorts = cohort_gpus(custom)
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
            for text in _summary(r, cohorts):
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
    preflight = document.get("preflight")
    if isinstance(preflight, dict):
        lines.append("")
        lines.extend(format_preflight(preflight))
    return "\n".join(lines)


def _roles(grants: list[dict[str, Any]]) -> str:
    return ", ".join(g["role"] for g in grants) or "none"


def format_preflight(preflight: dict[str, Any]) -> list[str]:
    """What the project must offer before `pulumi up`, per project: APIs, roles, quota."""
    projects = preflight.get("projects") or []
    lines = [
        "preflight: what each project must offer before `pulumi up` "
        "(`tools/preflight.py --stack <stack>` checks it against the project; docs/preflight.md)"
    ]
    if not projects:
        lines.append("  nothing in GCP: a cluster one brings authorizes its objects by its kubeconfig's RBAC")
    for p in projects:
        clusters = ", ".join(p.get("clusters") or [])
        lines.append(f"  project {p['project']}" + (f" (clusters {clusters})" if clusters else ""))
        apis = [a["api"] for a in p["apis"]]
        lines.append(f"    APIs: gcloud services enable {' '.join(apis)} --project {p['project']}")
        lines.append(f"    `pulumi up` roles: {_roles(p['roles']['up'])}")
        lines.append(f"    `pulumi preview` roles (read-only): {_roles(p['roles']['preview'])}")
        for b in p.get("buckets") or []:
            lines.append(
                f"    on bucket {b['bucket']}: up {_roles(b['roles']['up'])}; "
                f"preview {_roles(b['roles']['preview'])}"
            )
        for q in p.get("quotas") or []:
            most = "no set maximum" if q["max"] is None else f"up to {q['max']}"
            mark = " (metric UNVERIFIED)" if q.get("unverified") else ""
            lines.append(
                f"    quota {q['region']}: {q['metric']} {most} ({q['kind']}; {', '.join(q['pools'])}){mark}"
            )
    for unknown in preflight.get("unknownTypes") or []:
        lines.append(f"  UNKNOWN resource type {unknown}: no API or role row (a bug: gke_gpu/project)")
    return lines


def format_header(document: dict[str, Any]) -> list[str]:
    """What must not scroll away: the program's warnings, then the policy pack's verdict."""
    # Each message carries the one prefix of its kind ("note: ", "warning: "), as the engine prints it.
    lines = list(document.get("warnings") or [])
    policy = document.get("policy")
    if isinstance(policy, dict):
        if not policy.get("checked") and policy.get("optional"):
            lines.append(f"policy pack not run: {policy.get('reason')}")
        elif not policy.get("checked"):
            lines.append(f"policy check skipped: {policy.get('reason')}")
        else:
            lines.append(str(policy.get("summary")))
            for v in policy.get("violations") or []:
                level = "MANDATORY" if v.get("enforcementLevel") == "mandatory" else "advisory"
                where = f"{v.get('resource')} [{v.get('type')}]"
                lines.append(f"  - {level} {where}: {v.get('policy')}: {v.get('message')}")
    return lines
