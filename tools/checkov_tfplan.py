"""The offline render's GCP resources as a minimal Terraform plan JSON, the input checkov's
`terraform_plan` framework reads.

One `google_*` resource per Pulumi resource (`terraform_type`), named `<terraform type>.<Pulumi
resource name>` (any character outside [A-Za-z0-9_-] becomes `_`), its inputs in snake_case
(`snake_case`) with nested blocks as lists; a value known only after apply is left out and listed in
`after_unknown`. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The offline render's placeholders (tools/offline.py): a value computed by GCP, a secret.
UNKNOWN = "(known after apply)"

# Pulumi type tokens and the Terraform resource types they bridge. Others follow the usual rule
# (gcp:<module>/<x>:<Type> -> google_<module>_<type>), which holds for most of pulumi-gcp.
TERRAFORM_TYPES = {
    "gcp:container/cluster:Cluster": "google_container_cluster",
    "gcp:container/nodePool:NodePool": "google_container_node_pool",
    "gcp:compute/network:Network": "google_compute_network",
    "gcp:compute/subnetwork:Subnetwork": "google_compute_subnetwork",
    "gcp:compute/router:Router": "google_compute_router",
    "gcp:compute/routerNat:RouterNat": "google_compute_router_nat",
    "gcp:compute/firewall:Firewall": "google_compute_firewall",
    "gcp:serviceaccount/account:Account": "google_service_account",
    "gcp:projects/iAMMember:IAMMember": "google_project_iam_member",
    "gcp:monitoring/dashboard:Dashboard": "google_monitoring_dashboard",
    "gcp:monitoring/alertPolicy:AlertPolicy": "google_monitoring_alert_policy",
}
# Pulumi names plural the Terraform blocks that may repeat; the Terraform name is singular.
FIELD_NAMES = {
    "guestAccelerators": "guest_accelerator",
    "secondaryIpRanges": "secondary_ip_range",
    "taints": "taint",
    "subnetworks": "subnetwork",
    "sourceIpRangesToNats": "source_ip_ranges_to_nat",
}
# Inputs that are Terraform maps, not blocks: their keys stay as written (label keys, metadata).
MAP_FIELDS = {"labels", "resourceLabels", "userLabels", "metadata", "resourceManagerTags", "tags"}


def terraform_type(pulumi_type: str) -> str:
    if pulumi_type in TERRAFORM_TYPES:
        return TERRAFORM_TYPES[pulumi_type]
    match = re.fullmatch(r"gcp:([A-Za-z0-9]+)/[A-Za-z0-9]+:([A-Za-z0-9]+)", pulumi_type)
    if not match:
        raise ValueError(f"{pulumi_type!r} is not a pulumi-gcp resource type")
    return f"google_{match.group(1).lower()}_{snake_case(match.group(2))}"


def snake_case(name: str) -> str:
    """Pulumi's camelCase input names back to Terraform's: ``masterIpv4CidrBlock`` ->
    ``master_ipv4_cidr_block``, ``enableK8sTokensViaDns`` -> ``enable_k8s_tokens_via_dns``."""
    if name in FIELD_NAMES:
        return FIELD_NAMES[name]
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def resource_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _convert(value: Any) -> tuple[Any, Any]:
    """(value for `after`, mark for `after_unknown`) of one input. A block (a Pulumi object that is
    not a map) becomes a list of one; a value known only after apply is left out, marked True."""
    if value == UNKNOWN:
        return None, True
    if isinstance(value, Mapping):
        block, unknown = _convert_block(value)
        return [block], [unknown] if unknown else None
    if isinstance(value, list):
        items: list[Any] = []
        marks: list[Any] = []
        for item in value:
            if isinstance(item, Mapping):
                block, unknown = _convert_block(item)
                items.append(block)
                marks.append(unknown)
            else:
                items.append(None if item == UNKNOWN else item)
                marks.append(item == UNKNOWN)
        return items, marks if any(marks) else None
    return value, None


def _convert_block(inputs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    after: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for key, value in inputs.items():
        name = snake_case(key)
        if key in MAP_FIELDS and isinstance(value, Mapping):
            known = {k: v for k, v in value.items() if v != UNKNOWN}
            after[name] = known
            if len(known) != len(value):
                unknown[name] = {k: True for k, v in value.items() if v == UNKNOWN}
            continue
        converted, mark = _convert(value)
        if mark is True:
            unknown[name] = True
            continue
        after[name] = converted
        if mark:
            unknown[name] = mark
    return after, unknown


def to_terraform_plan(render: Mapping[str, Any]) -> dict[str, Any]:
    """A minimal Terraform plan JSON (format 1.2) creating the render's GCP resources."""
    planned: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    seen: set[str] = set()
    for resource in render.get("resources", []):
        if resource.get("component") or not str(resource.get("type", "")).startswith("gcp:"):
            continue
        tf_type = terraform_type(resource["type"])
        name = resource_name(resource["name"])
        address = f"{tf_type}.{name}"
        if address in seen:
            raise ValueError(f"two resources convert to {address}")
        seen.add(address)
        after, unknown = _convert_block(resource.get("inputs", {}))
        common = {
            "address": address,
            "mode": "managed",
            "type": tf_type,
            "name": name,
            "provider_name": "registry.terraform.io/hashicorp/google",
        }
        planned.append({**common, "schema_version": 0, "values": after, "sensitive_values": {}})
        changes.append(
            {
                **common,
                "change": {
                    "actions": ["create"],
                    "before": None,
                    "after": after,
                    "after_unknown": unknown,
                    "before_sensitive": False,
                    "after_sensitive": {},
                },
            }
        )
    return {
        "format_version": "1.2",
        # Not produced by Terraform: converted from the Pulumi render by tools/checkov_scan.py.
        "terraform_version": "0.0.0-pulumi-render",
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": changes,
        "configuration": {"root_module": {}},
    }
