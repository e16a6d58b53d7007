"""Cluster and node guardrails: deletion protection in production, a dedicated node service account,
Workload Identity metadata, and Shielded VM nodes.

The same conventions as `rules` (camelCase props, UNKNOWN never a violation, every message names its
resource and ends with the policy name in brackets); `rules` adds these to `POLICIES`.
"""

from __future__ import annotations

import re
from typing import Any

from pulumi_policy import PolicyConfigSchema, ReportViolation, ResourceValidationArgs

from .base import PROD_PATTERN_PROPERTY, _effective, _prod_match, _report
from .constants import BARE_METAL_LABEL, CLUSTER, NODE_POOL
from .props import UNKNOWN, get, stack_of

# Policy names (IDs in `pulumi preview` output and keys of the pack config).
PROD_DELETION_PROTECTION = "prod-cluster-deletion-protection"
NODE_SERVICE_ACCOUNT = "node-dedicated-service-account"
NODE_WORKLOAD_IDENTITY = "node-workload-identity"
NODE_SHIELDED = "node-shielded-vm"

_DEFAULT_COMPUTE_SA = re.compile(r".+-compute@developer\.gserviceaccount\.com")

PROD_DELETION_SCHEMA = PolicyConfigSchema(properties={"prodStackPattern": PROD_PATTERN_PROPERTY})


def validate_prod_deletion_protection(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    """A production cluster has deletionProtection true (pulumi-gcp's default when unset)."""
    if args.resource_type != CLUSTER:
        return
    stack = stack_of(args.urn)
    prod = _prod_match(stack, args.get_config(), PROD_DELETION_SCHEMA)
    subject = f"cluster {args.name!r}"
    if isinstance(prod, str):
        _report(report_violation, PROD_DELETION_PROTECTION, subject, prod)
        return
    if not prod:
        return
    protection = _effective(args.props, "deletionProtection")
    if protection is UNKNOWN or protection is True:
        return
    _report(
        report_violation,
        PROD_DELETION_PROTECTION,
        subject,
        f"deletionProtection is {protection!r} in production stack {stack!r}: set it to true "
        "(a `pulumi destroy` or a replacement would delete the cluster and every workload on it)",
    )


def _is_autopilot(props: Any) -> Any:
    autopilot = get(props, "enableAutopilot")
    return UNKNOWN if autopilot is UNKNOWN else autopilot is True


def _service_account_problem(value: Any) -> str | None:
    if value is UNKNOWN:
        return None
    if value is None or value == "":
        return "is not set, so GKE uses the Compute Engine default service account"
    if value == "default":
        return "is 'default' (the Compute Engine default service account)"
    if isinstance(value, str) and _DEFAULT_COMPUTE_SA.fullmatch(value):
        return f"is {value!r}, the Compute Engine default service account"
    return None


def validate_node_service_account(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Nodes run as a dedicated service account, never the Compute Engine default one."""
    checks: list[tuple[str, Any]] = []
    if args.resource_type == NODE_POOL:
        subject = f"node pool {args.name!r}"
        checks.append(("nodeConfig.serviceAccount", get(args.props, "nodeConfig", "serviceAccount")))
    elif args.resource_type == CLUSTER:
        subject = f"cluster {args.name!r}"
        autopilot = _is_autopilot(args.props)
        if autopilot is UNKNOWN:
            return
        defaults = ("clusterAutoscaling", "autoProvisioningDefaults", "serviceAccount")
        if autopilot:
            checks.append((".".join(defaults), get(args.props, *defaults)))
        else:
            # The default pool (created, then removed when removeDefaultNodePool) runs as this account.
            checks.append(("nodeConfig.serviceAccount", get(args.props, "nodeConfig", "serviceAccount")))
            if get(args.props, "clusterAutoscaling", "enabled") is True:  # node auto-provisioning
                checks.append((".".join(defaults), get(args.props, *defaults)))
    else:
        return
    for path, value in checks:
        problem = _service_account_problem(value)
        if problem:
            _report(
                report_violation,
                NODE_SERVICE_ACCOUNT,
                subject,
                f"{path} {problem}, which has broad project roles; use a dedicated account with "
                "roles/container.defaultNodeServiceAccount",
            )


def validate_node_workload_identity(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Nodes serve Workload Identity metadata (GKE_METADATA), never the node's own credentials."""
    checks: list[tuple[str, Any]] = []
    if args.resource_type == NODE_POOL:
        subject = f"node pool {args.name!r}"
        checks.append(("nodeConfig", get(args.props, "nodeConfig")))
    elif args.resource_type == CLUSTER:
        subject = f"cluster {args.name!r}"
        autopilot = _is_autopilot(args.props)
        if autopilot is UNKNOWN or autopilot:
            return  # Autopilot always runs Workload Identity.
        pool = get(args.props, "workloadIdentityConfig", "workloadPool")
        if pool is None or pool == "":
            _report(
                report_violation,
                NODE_WORKLOAD_IDENTITY,
                subject,
                "workloadIdentityConfig.workloadPool is not set: Workload Identity is off, so Pods "
                "can only use the node's service account",
            )
        checks.append(("nodeConfig", get(args.props, "nodeConfig")))
    else:
        return
    for path, node_config in checks:
        mode = get(node_config, "workloadMetadataConfig", "mode")
        if mode is UNKNOWN or mode == "GKE_METADATA":
            continue
        found = "not set" if mode is None else f"{mode!r}"
        _report(
            report_violation,
            NODE_WORKLOAD_IDENTITY,
            subject,
            f"{path}.workloadMetadataConfig.mode is {found}: set GKE_METADATA so Pods get Workload "
            "Identity credentials and cannot read the node's metadata server",
        )


def validate_node_shielded(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Nodes are Shielded VMs: secure boot and integrity monitoring not off (secure boot defaults off)."""
    if args.resource_type == NODE_POOL:
        subject = f"node pool {args.name!r}"
    elif args.resource_type == CLUSTER:
        subject = f"cluster {args.name!r}"
        autopilot = _is_autopilot(args.props)
        if autopilot is UNKNOWN or autopilot:
            return  # Autopilot nodes are always Shielded, with secure boot.
        bare_metal = get(args.props, "resourceLabels", BARE_METAL_LABEL) == "true"
        if _effective(args.props, "enableShieldedNodes") is False and not bare_metal:
            _report(report_violation, NODE_SHIELDED, subject, "enableShieldedNodes is false")
    else:
        return
    node_config = get(args.props, "nodeConfig")
    if node_config is UNKNOWN:
        return
    for field in ("enableSecureBoot", "enableIntegrityMonitoring"):
        value = _effective(node_config, "shieldedInstanceConfig", field)
        if value is False:
            unset = get(node_config, "shieldedInstanceConfig", field) is None
            _report(
                report_violation,
                NODE_SHIELDED,
                subject,
                f"nodeConfig.shieldedInstanceConfig.{field} is "
                + ("not set (defaults to false)" if unset else "false")
                + ": set it to true",
            )
