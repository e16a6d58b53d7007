"""Tenancy guardrails a security reviewer asks for (docs/security.md):

* `team-namespace-not-privileged`: a team's namespace (a Namespace labelled `gke-gpu/team`) enforces
  Pod Security `baseline` or `restricted`, never `privileged` (nor no level: the cluster's default is
  `privileged`). A team's GPUDirect namespace (labelled `gke-gpu/gpudirect-team`) is `privileged` only
  where the ValidatingAdmissionPolicy `gke-gpu-gpudirect-pods` is bound to it.
* `privileged-image-by-digest`: a privileged container's image is pinned by digest
  (`@sha256:<64 hex>`), unless its repository is one the stack accepts by tag (config
  `acceptedByTag`: by default the images whose digest could not be recorded, each named with its reason in
  docs/security.md).

The same conventions as `rules` (camelCase props, UNKNOWN never a violation, every message names its
resource and ends with the policy name).
"""

from __future__ import annotations

import re
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from .base import _report, _setting
from .props import UNKNOWN, entries, get, items
from .shared import group_kind
from .teams import TEAM_LABEL, _pods

TEAM_NOT_PRIVILEGED = "team-namespace-not-privileged"
PRIVILEGED_IMAGE_DIGEST = "privileged-image-by-digest"
GPUDIRECT_TEAM_LABEL = "gke-gpu/gpudirect-team"
GPUDIRECT_POD_POLICY = "gke-gpu-gpudirect-pods"
ENFORCE = "pod-security.kubernetes.io/enforce"
NAMESPACE = "kubernetes:core/v1:Namespace"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# Privileged images pinned by tag because no digest is published for their tags (docs/security.md,
# "Images"; the render lists them: stack output privilegedImagesByTag): GPUDirect's TCPX and gIB NCCL
# plugin installers, A4X Max's ASAPD-lite, and the DCGM exporter on GKE; and GKE's driver installer on DRA
# pools, an image GKE preloads on COS nodes and Google's manifest names by tag only, never pulled
# (imagePullPolicy Never: dra/driver_installer.py). TCPXO's installer and its `ubuntu` step run by the
# digests NVIDIA publishes (gpudirect/images.py PUBLISHED_DIGESTS), so they are not listed.
ACCEPTED_BY_TAG = [
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev",
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib",
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-arm64",
    "us-docker.pkg.dev/gce-ai-infra/asapd-lite/asapd-lite",
    "nvcr.io/nvidia/k8s/dcgm-exporter",
    "cos-nvidia-installer",
]
DIGEST_SCHEMA = PolicyConfigSchema(
    properties={
        "acceptedByTag": {
            "type": "array",
            "items": {"type": "string"},
            "default": ACCEPTED_BY_TAG,
            "description": "Image repositories (no tag) a privileged container may use by tag.",
        }
    }
)


def _bound_namespaces(args: StackValidationArgs) -> set[str] | None:
    """The namespaces the GPUDirect Pod policy's binding lists (None: unknown)."""
    found: set[str] = set()
    for r in args.resources:
        if r.resource_type != BINDING or get(r.props, "spec", "policyName") != GPUDIRECT_POD_POLICY:
            continue
        expressions = items(get(r.props, "spec", "matchResources", "namespaceSelector", "matchExpressions"))
        if expressions is UNKNOWN:
            return None
        for expression in expressions or []:
            values = items(get(expression, "values"))
            if values is UNKNOWN:
                return None
            if get(expression, "operator") == "In":
                found |= {v for v in values or [] if isinstance(v, str)}
    return found


def validate_team_namespace_not_privileged(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    bound = _bound_namespaces(args)
    for r in args.resources:
        if r.resource_type != NAMESPACE:
            continue
        labels = entries(get(r.props, "metadata", "labels"))
        name = get(r.props, "metadata", "name")
        if not isinstance(labels, dict) or not isinstance(name, str):
            continue
        level = labels.get(ENFORCE)
        if level is UNKNOWN or level in ("baseline", "restricted"):
            continue
        subject = f"Namespace {name!r}"
        if TEAM_LABEL in labels:
            _report(
                report_violation,
                TEAM_NOT_PRIVILEGED,
                subject,
                f"a team namespace enforces Pod Security {level or 'nothing (the default, privileged)'}: "
                "any member could run a privileged, host-PID Pod on nodes other teams share. Enforce "
                "baseline or restricted; GPUDirect's Pods run in the team's gpudirect-<team> namespace",
                r.urn,
            )
        elif GPUDIRECT_TEAM_LABEL in labels and bound is not None and name not in bound:
            _report(
                report_violation,
                TEAM_NOT_PRIVILEGED,
                subject,
                f"a team's GPUDirect namespace enforces Pod Security {level or 'nothing'} without the "
                f"ValidatingAdmissionPolicy {GPUDIRECT_POD_POLICY} bound to it: nothing confines its Pods "
                "to GPUDirect's exceptions",
                r.urn,
            )


def _pod_specs(resource_type: str, props: Any) -> list[Any]:
    if group_kind(resource_type) == ("apps", "DaemonSet"):
        return [get(props, "spec", "template", "spec")]
    return _pods(resource_type, props) or []


def validate_privileged_image_by_digest(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    accepted = set(_setting(args.get_config(), DIGEST_SCHEMA, "acceptedByTag"))
    for r in args.resources:
        for pod in _pod_specs(r.resource_type, r.props):
            for key in ("initContainers", "containers"):
                containers = items(get(pod, key))
                for container in containers if isinstance(containers, list) else []:
                    if get(container, "securityContext", "privileged") is not True:
                        continue
                    image = get(container, "image")
                    if not isinstance(image, str) or DIGEST.search(image):
                        continue
                    repository = re.sub(r":[^/:@]+$", "", image.split("@", 1)[0])
                    if repository in accepted:
                        continue
                    kind = r.resource_type.rsplit(":", 1)[-1]
                    _report(
                        report_violation,
                        PRIVILEGED_IMAGE_DIGEST,
                        f"{kind} {r.name!r}, container {get(container, 'name')!r}",
                        f"runs privileged from {image!r}, a tag: whoever can push that tag owns every node "
                        "it runs on. Pin it by digest (<image>@sha256:<64 hex>)",
                        r.urn,
                    )


SECURITY_POLICIES: list[Policy] = [
    StackValidationPolicy(
        name=TEAM_NOT_PRIVILEGED,
        description="Team namespaces never enforce Pod Security privileged; a team's GPUDirect namespace "
        "only where the GPUDirect admission policy binds it.",
        validate=validate_team_namespace_not_privileged,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    StackValidationPolicy(
        name=PRIVILEGED_IMAGE_DIGEST,
        description="Privileged containers' images are pinned by digest (or accepted by tag, by name).",
        validate=validate_privileged_image_by_digest,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=DIGEST_SCHEMA,
        severity=Severity.HIGH,
    ),
]
