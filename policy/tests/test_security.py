"""team-namespace-not-privileged and privileged-image-by-digest (policy/gke_gpu_policies/security.py)."""

from __future__ import annotations

from typing import Any

import pytest

from policy.gke_gpu_policies import security
from policy.tests.factories import stack_args, unknown, violations

NAMESPACE = "kubernetes:core/v1:Namespace"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
ENFORCE = "pod-security.kubernetes.io/enforce"


def namespace(name: str, labels: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return (NAMESPACE, f"{name}-namespace", {"metadata": {"name": name, "labels": labels}})


def binding(*namespaces: str) -> tuple[str, str, dict[str, Any]]:
    selector = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}
        ]
    }
    spec = {
        "policyName": "gke-gpu-gpudirect-pods",
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": selector},
    }
    return (BINDING, "gpudirect-admission-binding", {"metadata": {"name": "b"}, "spec": spec})


def teams(*resources: tuple[str, str, dict[str, Any]]) -> list[str]:
    return violations(security.validate_team_namespace_not_privileged, stack_args(list(resources)))


def test_a_team_namespace_at_baseline_or_restricted_complies() -> None:
    for level in ("baseline", "restricted"):
        assert teams(namespace("research", {"gke-gpu/team": "research", ENFORCE: level})) == []


@pytest.mark.parametrize("labels", [{ENFORCE: "privileged"}, {}])
def test_a_team_namespace_at_privileged_or_no_level_is_a_violation(labels: dict[str, str]) -> None:
    (message,) = teams(namespace("research", {"gke-gpu/team": "research", **labels}))
    assert message.startswith("Namespace 'research': a team namespace enforces Pod Security")
    assert message.endswith("[team-namespace-not-privileged]")


def test_a_teams_gpudirect_namespace_is_privileged_only_under_the_admission_policy() -> None:
    gpudirect = namespace("gpudirect-research", {"gke-gpu/gpudirect-team": "research", ENFORCE: "privileged"})
    assert teams(gpudirect, binding("gpudirect-research", "research")) == []
    (message,) = teams(gpudirect, binding("research"))
    assert "without the ValidatingAdmissionPolicy gke-gpu-gpudirect-pods bound to it" in message
    (message,) = teams(gpudirect)
    assert message.startswith("Namespace 'gpudirect-research'")


def test_other_namespaces_and_unknown_levels_are_not_judged() -> None:
    assert teams(namespace("kube-system", {ENFORCE: "privileged"})) == []
    assert teams(namespace("research", {"gke-gpu/team": "research", ENFORCE: unknown("string")})) == []


def pod(image: str, *, privileged: bool = True) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": image, "securityContext": {"privileged": privileged}}]}


def daemon_set(spec: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return (DAEMON_SET, "ds", {"metadata": {"name": "ds"}, "spec": {"template": {"spec": spec}}})


def images(*resources: tuple[str, str, dict[str, Any]], config: dict[str, Any] | None = None) -> list[str]:
    return violations(
        security.validate_privileged_image_by_digest, stack_args(list(resources), config=config)
    )


def test_a_privileged_image_by_tag_is_a_violation_and_by_digest_complies() -> None:
    (message,) = images(daemon_set(pod("registry.example/agent:1.0")))
    assert message.startswith(
        "DaemonSet 'ds', container 'c': runs privileged from 'registry.example/agent:1.0'"
    )
    assert message.endswith("[privileged-image-by-digest]")
    assert images(daemon_set(pod("registry.example/agent@sha256:" + "a" * 64))) == []
    # A digest of the wrong length is still a tag's trust.
    assert len(images(daemon_set(pod("registry.example/agent@sha256:" + "a" * 63)))) == 1
    # Not privileged: not this rule's.
    assert images(daemon_set(pod("registry.example/agent:1.0", privileged=False))) == []


def test_the_accepted_repositories_by_tag_are_configurable() -> None:
    accepted = daemon_set(pod("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"))
    assert images(accepted) == []
    assert len(images(accepted, config={"acceptedByTag": []})) == 1
