"""The preflight in the render (issue 36, item 1): per example stack, the APIs, the deployer's least
roles for `pulumi up` and the read-only ones for `pulumi preview`, and the GPU quota lines, computed
from what the render declares; the tables held to their vendored sources."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gke_gpu.core.catalog import load_catalog
from gke_gpu.project.apis import API_TITLES, FEATURE_APIS, NO_API_PREFIXES, RESOURCE_APIS, apis_of
from gke_gpu.project.permissions import TYPE_PERMISSIONS, permissions_of
from gke_gpu.project.preflight import DeclaredResource, compute_preflight
from gke_gpu.project.quotas import GPU_QUOTA_METRICS, region_of
from gke_gpu.project.roles import PREVIEW_ROLES, ROLES_PATH, UP_ROLES, least_roles, predefined_roles
from tests.conftest import stack_render
from tools.offline import stacks
from tools.plan import to_document

WRITE_VERBS = ("create", "update", "delete", "setIamPolicy", "enable", "disable", "actAs", "connect")


def _document(stack: str) -> dict[str, Any]:
    return to_document(stack_render(stack))


def _project(stack: str) -> dict[str, Any]:
    (project,) = _document(stack)["preflight"]["projects"]
    return project


@pytest.mark.parametrize("stack", stacks())
def test_every_rendered_resource_type_has_a_row(stack: str) -> None:
    """A type the render declares but the tables lack fails here: add its API (apis.py) and its
    permissions (permissions.py), with their sources."""
    document = _document(stack)
    assert document["preflight"]["unknownTypes"] == []
    for r in document["resources"]:
        if r["component"] or r["type"].startswith(NO_API_PREFIXES):
            continue
        assert r["type"] in RESOURCE_APIS, r["type"]
        assert permissions_of(r["type"]) is not None, r["type"]
    for project in document["preflight"]["projects"]:
        assert project["ungranted"] == [], project["project"]


def test_a_type_without_a_row_is_reported() -> None:
    needs, unknown = apis_of([("gcp:gkehub/membership:Membership", {}), ("gke-gpu:index:X", {})])
    assert needs == [] and unknown == ["gcp:gkehub/membership:Membership"]
    preflight = compute_preflight(
        [DeclaredResource("gcp:gkehub/membership:Membership", "m", {"project": "p"})], default_project="p"
    )
    assert preflight.unknown_types == ["gcp:gkehub/membership:Membership"]


def test_serve_lists_what_its_first_pulumi_up_would_have_failed_on() -> None:
    """The serving stack's Artifact Registry repository and IAM, the model bucket's IAM member and
    image streaming: the APIs and roles 0033ada's README lacked (a 403 on the first `pulumi up`)."""
    project = _project("serve")
    apis = {a["api"] for a in project["apis"]}
    assert {"artifactregistry.googleapis.com", "containerfilesystem.googleapis.com"} <= apis
    up = {g["role"] for g in project["roles"]["up"]}
    assert "roles/artifactregistry.admin" in up
    (bucket,) = project["buckets"]
    assert bucket["bucket"] == "example-gpu-serve-models"
    assert [g["role"] for g in bucket["roles"]["up"]] == ["roles/storage.legacyBucketOwner"]
    assert "storage.buckets.setIamPolicy" in bucket["roles"]["up"][0]["permissions"]


def test_prod_lists_binary_authorization() -> None:
    apis = {a["api"]: a["for"] for a in _project("prod")["apis"]}
    assert "binaryauthorization.googleapis.com" in apis
    assert any("Binary Authorization" in why for why in apis["binaryauthorization.googleapis.com"])
    assert "binaryauthorization.googleapis.com" not in {a["api"] for a in _project("dev")["apis"]}


def test_train_needs_firewall_rights_and_dws_quota() -> None:
    project = _project("train")
    assert "roles/compute.securityAdmin" in {g["role"] for g in project["roles"]["up"]}
    quotas = {(q["region"], q["metric"]): q for q in project["quotas"]}
    # Two A3 Mega nodes of 8 GPUs through queued provisioning: DWS draws on the preemptible quota.
    assert quotas[("us-central1", "PREEMPTIBLE_NVIDIA_H100_MEGA_GPUS")]["max"] == 16
    assert quotas[("us-central1", "PREEMPTIBLE_NVIDIA_H100_MEGA_GPUS")]["kind"] == "dws"
    assert quotas[("global", "GPUS_ALL_REGIONS")]["max"] == 16


def test_prod_quota_is_each_pools_most_gpus_on_demand() -> None:
    quotas = {(q["region"], q["metric"]): q["max"] for q in _project("prod")["quotas"]}
    assert quotas == {
        ("global", "GPUS_ALL_REGIONS"): 6,
        ("us-central1", "NVIDIA_L4_GPUS"): 4,
        ("us-central1", "NVIDIA_A100_GPUS"): 2,
        # The GPU machines' vCPUs: 4 g2-standard-8, 2 a2-highgpu-1g (12 vCPUs each: A2's own metric).
        ("us-central1", "CPUS"): 32,
        ("us-central1", "A2_CPUS"): 24,
        ("global", "NETWORKS"): 1,
    }


def test_a_reserved_rack_needs_its_reservation_not_quota() -> None:
    quotas = [q for q in _project("nvl72")["quotas"] if q["kind"] != "networks"]
    assert [(q["metric"], q["max"], q["kind"]) for q in quotas] == [("reservation a4x-rack", 64, "reserved")]


def test_train_counts_its_nine_networks_and_its_nodes_vcpus() -> None:
    # The cluster's VPC and the 8 GPU NIC VPCs of A3 Mega (TCPXO), against the project's NETWORKS quota,
    # which counts the default network too (cloud.google.com/vpc/docs/quota): the live check reads it.
    quotas = {(q["region"], q["metric"]): q for q in _project("train")["quotas"]}
    networks = quotas[("global", "NETWORKS")]
    assert networks["max"] == 9 and networks["kind"] == "networks" and len(networks["pools"]) == 9
    # Two a3-megagpu-8g (208 vCPUs each) through DWS: the preemptible vCPU quota, marked UNVERIFIED.
    cpus = quotas[("us-central1", "PREEMPTIBLE_CPUS")]
    assert cpus["max"] == 416 and cpus["unverified"] is True


def test_a_fleet_gets_a_quota_line_per_region_of_its_workers() -> None:
    project = _project("fleet")
    assert len(project["clusters"]) == 3
    regions = {q["region"] for q in project["quotas"] if q["metric"] == "PREEMPTIBLE_NVIDIA_H100_GPUS"}
    assert regions == {"us-central1", "us-east4"}


def test_autopilot_profiles_list_their_metrics_without_a_maximum() -> None:
    quotas = {q["metric"]: q for q in _project("dev")["quotas"]}
    assert quotas["PREEMPTIBLE_NVIDIA_L4_GPUS"]["max"] is None
    assert quotas["NVIDIA_L4_GPUS"]["max"] is None
    assert "containerfilesystem.googleapis.com" in {a["api"] for a in _project("dev")["apis"]}


def test_a_cluster_one_brings_needs_nothing_in_gcp() -> None:
    assert _document("onprem")["preflight"]["projects"] == []


def test_preview_roles_are_read_only_and_up_roles_grant_the_writes() -> None:
    roles = predefined_roles()
    for role in PREVIEW_ROLES:
        writes = [
            p
            for p in roles[role].permissions
            # Creating an access or token review asks a question; it changes nothing.
            if p.rsplit(".", 1)[-1].startswith(WRITE_VERBS[:5]) and not p.split(".")[1].endswith("Reviews")
        ]
        assert not writes, (role, writes[:5])
    for type_, perms in TYPE_PERMISSIONS.items():
        _, left = least_roles(perms.up, UP_ROLES)
        assert left == [], (type_, left)
        _, left = least_roles(perms.preview, PREVIEW_ROLES)
        assert left == [], (type_, left)


def test_each_chosen_role_grants_the_permissions_it_is_listed_for() -> None:
    """The grants come from the vendored definitions: a role that lost a permission upstream (and a
    re-vendored file) fails here."""
    roles = predefined_roles()
    for stack in stacks():
        for project in _document(stack)["preflight"]["projects"]:
            for grant in [*project["roles"]["up"], *project["roles"]["preview"]]:
                assert set(grant["permissions"]) <= roles[grant["role"]].permissions
                assert grant["permissions"], f"{stack}: {grant['role']} is chosen for nothing"


def test_the_least_role_is_chosen_over_a_broader_one() -> None:
    grants, _ = least_roles(["iam.serviceAccounts.get", "iam.serviceAccounts.getIamPolicy"], PREVIEW_ROLES)
    assert [g.role for g in grants] == ["roles/iam.serviceAccountViewer"]
    grants, _ = least_roles(["compute.networks.get", "compute.resourcePolicies.get"], PREVIEW_ROLES)
    assert [g.role for g in grants] == ["roles/compute.viewer"], "one role, not networkViewer as well"


def test_the_vendored_roles_name_their_source() -> None:
    data = json.loads(ROLES_PATH.read_text(encoding="utf-8"))
    assert "iann0036/iam-dataset@" in data["source"]
    for role in {*UP_ROLES, *PREVIEW_ROLES}:
        assert role in data["roles"], role
        assert data["roles"][role]["stage"] == "GA", role


def test_every_api_has_a_title_and_every_feature_a_source() -> None:
    used = {api for apis in RESOURCE_APIS.values() for api in apis} | {f.api for f in FEATURE_APIS}
    assert used <= set(API_TITLES)
    for feature in FEATURE_APIS:
        assert feature.source and feature.type in RESOURCE_APIS


def test_every_accelerator_of_the_catalog_has_a_quota_metric() -> None:
    assert set(load_catalog().accelerators) == set(GPU_QUOTA_METRICS)


@pytest.mark.parametrize(
    ("location", "region"),
    [("us-central1", "us-central1"), ("us-central1-a", "us-central1"), ("europe-west4-b", "europe-west4")],
)
def test_a_zonal_location_counts_in_its_region(location: str, region: str) -> None:
    assert region_of(location) == region


def test_the_render_prints_the_preflight() -> None:
    from tools.plan_tree import format_tree

    text = format_tree(_document("serve"))
    assert "preflight: what each project must offer before `pulumi up`" in text
    assert "gcloud services enable artifactregistry.googleapis.com" in text
    assert "quota us-central1: NVIDIA_L4_GPUS up to 3" in text


def test_a_fleet_needs_the_hub_and_the_gateway_and_may_register_memberships() -> None:
    """Every fleet cluster is a GKE Hub membership (its `fleet` block), and the manager's Kueue reaches
    the workers through Connect Gateway: the fleet stack's project enables both APIs, and the deployer
    holds the membership permissions (Fleet Editor; Fleet Viewer to read them back)."""
    (project,) = _document("fleet")["preflight"]["projects"]
    apis = {a["api"]: a["for"] for a in project["apis"]}
    assert "fleet membership (fleet.project)" in apis["gkehub.googleapis.com"]
    assert "connectgateway.googleapis.com" in apis
    up = {g["role"]: g["permissions"] for g in project["roles"]["up"]}
    assert set(up["roles/gkehub.editor"]) == {
        f"gkehub.memberships.{verb}" for verb in ("create", "get", "update", "delete")
    }
    preview = {g["role"]: g["permissions"] for g in project["roles"]["preview"]}
    assert preview["roles/gkehub.viewer"] == ["gkehub.memberships.get"]
    for stack in ("prod", "train"):
        (single,) = _document(stack)["preflight"]["projects"]
        assert "gkehub.googleapis.com" not in {a["api"] for a in single["apis"]}, stack
