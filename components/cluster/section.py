"""The stack file's cluster section (`gke-gpu:cluster`): checked and resolved by the cluster's own rules
(cluster/rules.py, shared with GkeCluster, and the maintenance window's), and what only a stack file
has: the name and location defaults, an existing cluster's kubeconfig, prod's Binary Authorization, and
who reaches the control plane's endpoint."""

from __future__ import annotations

from typing import Any

import yaml

from ..core.common import (
    K8S_NAME,
    KUBECONFIG_CHECK_LIMIT,
    LABEL_VALUE_PATTERN,
    PROJECT_PATTERN,
    ZONE_PATTERN,
    KeyNames,
    cut,
    listing,
    network_of,
)
from ..core.section import SectionContext
from .kubeconfig import kubeconfig_credentials
from .maintenance import check_maintenance
from .model import AuthorizedNetworkConfig, ClusterConfig, SystemPoolConfig
from .rules import check_nodes, check_private_nodes, check_public_endpoint_networks

# The stack whose cluster must enforce Binary Authorization unless told otherwise.
PROD_STACK = "prod"


def _zone_example(ctx: SectionContext) -> str:
    """A zone of the stack's region, for a message: one the catalog lists, else the form."""
    zones = sorted({z for a in ctx.catalog.accelerators.values() for z in a.zones.get(ctx.region or "", ())})
    return f"one of its zones such as {zones[0]}" if zones else f"one of its zones ({ctx.region}-<letter>)"


# -- cluster ----------------------------------------------------------------------------------


def check_cluster(c: ClusterConfig, ctx: SectionContext, *, dashboard_or_alerts: bool) -> ClusterConfig:
    """The cluster section, resolved: its name (default `<project>-<stack>`) and location (default the
    region), the display names of its authorized networks and its system pool; `dashboard_or_alerts`:
    the monitoring section asks for the dashboard or alerts (they filter on an existing cluster's name)."""
    prefix = f"{ctx.root}cluster"
    if c.mode == "existing":
        return _existing_cluster(c, prefix, ctx, dashboard_or_alerts=dashboard_or_alerts)
    for key in ("kubeconfig", "context", "flavor"):
        if key in c.model_fields_set:
            ctx.problems.add(f"{prefix}.{key}", f"only allowed with mode existing (mode is {c.mode})")

    name = c.name or f"{ctx.project}-{ctx.stack}"
    project_ok = bool(ctx.project and PROJECT_PATTERN.fullmatch(ctx.project))
    name_known = "name" not in ctx.broken.cluster_keys
    if name_known and (c.name or project_ok) and not (K8S_NAME.fullmatch(name) and len(name) <= 40):
        key = "name" if c.name else "name (default <project>-<stack>)"
        ctx.problems.add(
            f"{prefix}.{key}",
            f"{cut(name)} is not a valid GKE cluster name; use at most 40 lowercase letters, digits "
            "and hyphens, starting with a letter",
        )

    location = c.location or ctx.region or ""
    if c.location and ctx.region_known:
        zone = ZONE_PATTERN.fullmatch(c.location)
        if c.location == ctx.region:
            pass
        elif zone and zone.group(1) == ctx.region:
            if c.mode == "autopilot":
                ctx.problems.add(
                    f"{prefix}.location",
                    f"{cut(c.location)} is a zone; Autopilot clusters are regional, so use "
                    f"{cut(ctx.region)} or leave location out",
                )
        else:
            ctx.problems.add(
                f"{prefix}.location",
                f"{cut(c.location)} is not allowed: it is not region {ctx.region} or one of its "
                f"zones; allowed: {ctx.region} (a regional cluster) or {_zone_example(ctx)}",
            )
            # The pools are judged in the region: a zone of another region says nothing of them.
            location = ctx.region or ""
            ctx.broken.cluster_keys.add("location")

    authorized: list[AuthorizedNetworkConfig] = []
    for i, entry in enumerate(c.authorized_networks):
        path = f"{prefix}.masterAuthorizedNetworks[{i}].cidrBlock"
        net = network_of(entry.cidr_block, path, ctx.problems)
        if net is not None:
            authorized.append(
                entry.model_copy(update={"display_name": entry.display_name or entry.cidr_block})
            )
    # GkeCluster's own rules (cluster/rules.py), named as the stack file writes them.
    names = KeyNames(prefix, camel=True)
    check_private_nodes(names, ctx.problems, private_nodes=c.private_nodes, public_endpoint=c.public_endpoint)
    if c.kubeconfig_endpoint == "ip" and not c.public_endpoint:
        ctx.notes.append(
            f"{prefix}.kubeconfigEndpoint: ip with a private IP endpoint: `pulumi up` reaches the "
            "cluster only from inside its VPC (docs/configuration.md, 'Upgrading an existing stack')"
        )
    _check_hardening(c, prefix, ctx)
    endpoint_keys = {"publicEndpoint", "publicEndpointOpenToInternet", "masterAuthorizedNetworks"}
    if not endpoint_keys & ctx.broken.cluster_keys:
        _check_endpoint(c, authorized, prefix, ctx)

    check_nodes(
        c,
        names,
        ctx.problems,
        autopilot_key="mode autopilot" if c.autopilot else None,
        location=location,
        gpu_series=ctx.catalog.gpu_series,
    )
    check_maintenance(names, ctx.problems, c.maintenance)
    system_pool = None if c.autopilot else (c.system_pool or SystemPoolConfig())

    # The same type, resolved: the name, the location, display names and the system pool.
    return c.model_copy(
        update={
            "name": name,
            "location": location,
            "authorized_networks": authorized,
            "system_pool": system_pool,
        }
    )


def _check_hardening(c: ClusterConfig, prefix: str, ctx: SectionContext) -> None:
    """Binary Authorization stays on in a stack named prod unless turned off on purpose; a DNS
    endpoint closed to the internet is reached only from Google Cloud (docs/security.md)."""
    acknowledged = c.binary_authorization_off_acknowledged
    if ctx.stack == PROD_STACK and not c.binary_authorization and not acknowledged:
        ctx.problems.add(
            f"{prefix}.binaryAuthorization",
            f"{'false' if 'binary_authorization' in c.model_fields_set else 'unset (false)'} in "
            "stack prod: enforce the project's Binary Authorization policy (binaryAuthorization: "
            "true), or set binaryAuthorizationOffAcknowledged: true to run prod without it",
        )
    elif acknowledged and c.binary_authorization:
        ctx.problems.add(
            f"{prefix}.binaryAuthorizationOffAcknowledged",
            "true contradicts binaryAuthorization: true; remove one",
        )
    if not c.dns_endpoint_external:
        # What the setting means for where to run from, which no setting expresses: a note.
        ctx.notes.append(
            f"note: {prefix}.dnsEndpointExternal: false: the DNS endpoint answers only requests from "
            "Google Cloud's networks, so `pulumi up` and kubectl must run there (docs/security.md)"
        )


def _check_endpoint(
    c: ClusterConfig, authorized: list[AuthorizedNetworkConfig], prefix: str, ctx: SectionContext
) -> None:
    """The IP endpoint is private by default; a public one must be restricted unless meant open."""
    anywhere = [n.cidr_block for n in authorized if n.cidr_block.endswith("/0")]
    open_key = f"{prefix}.publicEndpointOpenToInternet"
    if not c.public_endpoint:
        if "public_endpoint_open_to_internet" in c.model_fields_set:
            ctx.problems.add(open_key, "only allowed with publicEndpoint: true (the IP endpoint is private)")
        if anywhere:
            ctx.problems.add(
                f"{prefix}.masterAuthorizedNetworks",
                f"{anywhere[0]} authorizes every address; list the networks that need the endpoint",
            )
        return
    check_public_endpoint_networks(len(authorized), f"{prefix}.masterAuthorizedNetworks", ctx.problems)
    wide_open = not authorized or bool(anywhere)
    if c.public_endpoint_open_to_internet:
        if not wide_open:
            ctx.problems.add(
                open_key,
                "true contradicts masterAuthorizedNetworks, which restricts the endpoint; remove one",
            )
        else:
            ctx.notes.append(
                f"{prefix}.publicEndpoint: the control plane's public IP endpoint accepts connections "
                "from any address (authentication is still required); see docs/configuration.md, 'Access'"
            )
    elif wide_open:
        what = (
            f"{anywhere[0]} in masterAuthorizedNetworks" if anywhere else "an empty masterAuthorizedNetworks"
        )
        ctx.problems.add(
            f"{prefix}.publicEndpoint",
            f"true with {what} opens the control plane to any address; list the networks that need "
            "it, use the DNS endpoint instead (publicEndpoint: false), or set "
            "publicEndpointOpenToInternet: true to mean it",
        )


def _existing_cluster(
    c: ClusterConfig, prefix: str, ctx: SectionContext, *, dashboard_or_alerts: bool
) -> ClusterConfig:
    gke_only = (
        "location",
        "release_channel",
        "private_nodes",
        "authorized_networks",
        "deletion_protection",
        "system_pool",
        "public_endpoint",
        "public_endpoint_open_to_internet",
        "binary_authorization",
        "binary_authorization_off_acknowledged",
        "intranode_visibility",
        "kubeconfig_endpoint",
        "minimum_version",
        "maintenance",
        "dns_endpoint_external",
        "secrets_encryption_key",
        "rbac_security_group",
        "hpa_profile",
        "auto_monitoring",
    )
    if c.name is not None and c.flavor is not None:
        # The name is pasted into Monitoring filters and PromQL: it must be a plain name.
        gke = c.flavor != "generic"
        pattern, most = (K8S_NAME, 40) if gke else (LABEL_VALUE_PATTERN, 63)
        if not c.name or len(c.name) > most or not pattern.fullmatch(c.name):
            kind = (
                "a GKE cluster name (lowercase letters, digits and hyphens, starting with a letter"
                if gke
                else "a cluster label value (letters, digits, '-', '_' and '.'"
            )
            ctx.problems.add(f"{prefix}.name", f"{cut(c.name)} is not {kind}, at most {most})")
    for key in gke_only:
        if key in c.model_fields_set:
            ctx.problems.add(
                f"{prefix}.{ClusterConfig.model_fields[key].alias}",
                "not allowed with mode existing: the program does not manage that cluster",
            )
    if not c.kubeconfig and "kubeconfig" not in ctx.broken.cluster_keys:
        ctx.problems.add(
            f"{prefix}.kubeconfig",
            "required with mode existing; set it as a secret: "
            '`pulumi config set --secret --path gke-gpu:cluster.kubeconfig "$(cat kubeconfig)"`',
        )
    if c.flavor is None and "flavor" not in ctx.broken.cluster_keys:
        ctx.problems.add(f"{prefix}.flavor", "required with mode existing; allowed: 'gke', 'generic'")
    _check_kubeconfig(c, prefix, ctx)
    name = c.name or ""
    monitoring_known = c.flavor is not None and "monitoring" not in ctx.broken.sections
    name_known = "name" not in ctx.broken.cluster_keys
    if name_known and monitoring_known and dashboard_or_alerts and not name:
        ctx.problems.add(
            f"{prefix}.name",
            "required when monitoring.dashboard or monitoring.alerts is on: the dashboard and "
            "alerts filter on the cluster name",
        )
    return c.model_copy(update={"name": name, "location": "", "deletion_protection": False})


def _check_kubeconfig(c: ClusterConfig, prefix: str, ctx: SectionContext) -> None:
    """A kubeconfig in plain text must hold no credential, and one that parses must have the named
    context (a secret not decrypted offline, or one that is not YAML, is left for the Kubernetes
    provider to judge)."""
    if not c.kubeconfig:
        return
    if len(c.kubeconfig) > KUBECONFIG_CHECK_LIMIT:  # parsing this much is slow: not read here
        _check_kubeconfig_secret(prefix, ctx, None, f"over {KUBECONFIG_CHECK_LIMIT // 1024} KiB")
        return
    try:
        documents = list(yaml.safe_load_all(c.kubeconfig))
    except (yaml.YAMLError, RecursionError, ValueError):
        _check_kubeconfig_secret(prefix, ctx, None, "not YAML")
        return
    _check_kubeconfig_secret(prefix, ctx, documents)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        return
    document = documents[0]
    entries = document.get("contexts")
    entries = entries if isinstance(entries, list) else []
    # Only string names count: an alias-expanded structure is not a context name.
    contexts = [ctx["name"] for ctx in entries if isinstance(ctx, dict) and isinstance(ctx.get("name"), str)]
    if not contexts:
        ctx.problems.add(f"{prefix}.kubeconfig", "has no contexts; is it a kubeconfig file?")
    elif c.context is not None and c.context not in contexts:
        ctx.problems.add(
            f"{prefix}.context",
            f"{cut(c.context)} is not a context of the kubeconfig; allowed: {listing(contexts)}",
        )


def _check_kubeconfig_secret(
    prefix: str, ctx: SectionContext, documents: list[Any] | None, unread: str = ""
) -> None:
    """A kubeconfig that holds a credential in any of its YAML documents must come from a secret
    (`secure:` in the stack file): in plain text it would sit in the repository and in every
    `pulumi preview` log. One that cannot be read (`documents` None; `unread` says why) cannot be
    cleared, so it must be a secret too."""
    if ctx.secret_keys is None or f"{ctx.root}cluster" in ctx.secret_keys:
        return  # not known (a caller without the engine's config) or stored as a secret
    store = (
        "store the kubeconfig as a secret: "
        '`pulumi config set --secret --path gke-gpu:cluster.kubeconfig "$(cat kubeconfig)"`'
    )
    if documents is None:
        ctx.problems.add(
            f"{prefix}.kubeconfig",
            f"is in plain text and {unread}, so it could not be checked for credentials; {store}",
        )
        return
    found = list(
        dict.fromkeys(
            path for doc in documents if isinstance(doc, dict) for path in kubeconfig_credentials(doc)
        )
    )
    if found:
        ctx.problems.add(
            f"{prefix}.kubeconfig",
            f"holds a credential in plain text ({listing(found, most=3)}); {store}",
        )
