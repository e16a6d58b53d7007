"""tools/checkov_scan.py without checkov: the render -> Terraform plan conversion, skips, results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import stack_render
from tools import checkov_scan as scan
from tools import plan
from tools.offline import UNKNOWN


def render_of(*resources: dict) -> dict:
    return {"format": plan.FORMAT, "stack": "test", "resources": list(resources)}


def resource(type_: str, name: str, inputs: dict, **extra) -> dict:
    return {"type": type_, "name": name, "inputs": inputs, "component": False, **extra}


def values(document: dict, address: str) -> dict:
    (found,) = [r for r in document["planned_values"]["root_module"]["resources"] if r["address"] == address]
    return found["values"]


def test_type_names() -> None:
    assert scan.terraform_type("gcp:container/cluster:Cluster") == "google_container_cluster"
    assert scan.terraform_type("gcp:serviceaccount/account:Account") == "google_service_account"
    assert scan.terraform_type("gcp:projects/iAMMember:IAMMember") == "google_project_iam_member"
    # The usual rule for the rest of pulumi-gcp.
    assert scan.terraform_type("gcp:compute/globalAddress:GlobalAddress") == "google_compute_global_address"
    with pytest.raises(ValueError, match="not a pulumi-gcp resource type"):
        scan.terraform_type("kubernetes:apps/v1:Deployment")


@pytest.mark.parametrize(
    ("pulumi", "terraform"),
    [
        ("masterIpv4CidrBlock", "master_ipv4_cidr_block"),
        ("enableK8sTokensViaDns", "enable_k8s_tokens_via_dns"),
        ("gcpPublicCidrsAccessEnabled", "gcp_public_cidrs_access_enabled"),
        ("diskSizeGb", "disk_size_gb"),
        ("name", "name"),
        # Pulumi's plural names of repeatable blocks.
        ("secondaryIpRanges", "secondary_ip_range"),
        ("guestAccelerators", "guest_accelerator"),
        ("taints", "taint"),
        ("sourceIpRangesToNats", "source_ip_ranges_to_nat"),
    ],
)
def test_snake_case(pulumi: str, terraform: str) -> None:
    assert scan.snake_case(pulumi) == terraform


def test_plan_shape_blocks_maps_and_unknowns() -> None:
    document = scan.to_terraform_plan(
        render_of(
            resource(
                "gcp:container/cluster:Cluster",
                "gke-cluster",
                {
                    "name": "gpu-prod",
                    "network": UNKNOWN,
                    "masterAuth": {"clientCertificateConfig": {"issueClientCertificate": False}},
                    "masterAuthorizedNetworksConfig": {
                        "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "vpn"}]
                    },
                    "resourceLabels": {"managed-by": "pulumi", "pulumi-stack": "prod"},
                    "nodeConfig": {
                        "serviceAccount": UNKNOWN,
                        "oauthScopes": ["scope"],
                        "metadata": {"a-B": "1"},
                        "enableComponents": ["SYSTEM_COMPONENTS", UNKNOWN],
                    },
                },
            ),
            resource(
                "gcp:projects/iAMMember:IAMMember",
                "gke-nodes-container.defaultNodeServiceAccount",
                {"role": "roles/container.defaultNodeServiceAccount"},
            ),
            resource("kubernetes:batch/v1:Job", "samples-job", {"kind": "Job"}),
            {"type": "gke-gpu:index:GkeCluster", "name": "gke", "inputs": {}, "component": True},
        )
    )
    # What checkov's terraform_plan parser requires to take the file as a plan.
    assert {"terraform_version", "planned_values", "resource_changes"} <= set(document)
    addresses = [r["address"] for r in document["planned_values"]["root_module"]["resources"]]
    assert addresses == [
        "google_container_cluster.gke-cluster",
        "google_project_iam_member.gke-nodes-container_defaultNodeServiceAccount",
    ], "only GCP resources, names made address-safe"
    cluster = values(document, "google_container_cluster.gke-cluster")
    assert cluster["master_auth"] == [{"client_certificate_config": [{"issue_client_certificate": False}]}]
    assert cluster["master_authorized_networks_config"] == [
        {"cidr_blocks": [{"cidr_block": "203.0.113.0/24", "display_name": "vpn"}]}
    ]
    # Maps keep their keys and are objects, not blocks.
    assert cluster["resource_labels"] == {"managed-by": "pulumi", "pulumi-stack": "prod"}
    assert cluster["node_config"][0]["metadata"] == {"a-B": "1"}
    # Values GCP computes are absent from `after` and marked in `after_unknown`.
    assert "network" not in cluster and "service_account" not in cluster["node_config"][0]
    (change,) = [c for c in document["resource_changes"] if c["type"] == "google_container_cluster"]
    assert change["change"]["actions"] == ["create"]
    assert change["change"]["after"] == cluster
    assert change["change"]["after_unknown"]["network"] is True
    assert change["change"]["after_unknown"]["node_config"] == [
        {"service_account": True, "enable_components": [False, True]}
    ]
    # Unknown items of a list stay in place (null), marked by position.
    assert cluster["node_config"][0]["enable_components"] == ["SYSTEM_COMPONENTS", None]


def test_converted_prod_render_carries_the_secure_defaults() -> None:
    result = stack_render("prod")
    assert result.error is None, result.error
    document = scan.to_terraform_plan(plan.to_document(result))
    types = {r["type"] for r in document["resource_changes"]}
    assert {"google_container_cluster", "google_container_node_pool", "google_compute_subnetwork"} <= types
    cluster = values(document, "google_container_cluster.gke-cluster")
    # The keys checkov's GKE checks read (CKV_GCP_13, 20, 18, 25, 61, 12).
    assert cluster["master_auth"][0]["client_certificate_config"][0]["issue_client_certificate"] is False
    assert cluster["master_authorized_networks_config"][0]["gcp_public_cidrs_access_enabled"] is False
    assert cluster["private_cluster_config"][0]["enable_private_endpoint"] is True
    # Prod's DNS endpoint answers only Google Cloud's networks (cluster.dnsEndpointExternal: false).
    assert (
        cluster["control_plane_endpoints_config"][0]["dns_endpoint_config"][0]["allow_external_traffic"]
        is False
    )
    assert cluster["binary_authorization"][0]["evaluation_mode"] == "PROJECT_SINGLETON_POLICY_ENFORCE"
    assert cluster["enable_intranode_visibility"] is False, "opt-in: turning it on restarts every node"
    assert cluster["network_policy"] == [{"enabled": False}]
    assert cluster["datapath_provider"] == "ADVANCED_DATAPATH"
    subnet = values(document, "google_compute_subnetwork.network-nodes")
    assert subnet["log_config"][0]["flow_sampling"] == 0.5  # CKV_GCP_26
    assert {r["range_name"] for r in subnet["secondary_ip_range"]} == {"pods", "services"}


def write_skips(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "skips.yaml"
    path.write_text(text)
    return path


def test_every_skip_names_check_resources_and_reason(tmp_path: Path) -> None:
    skips = scan.load_skips()  # the real file
    assert skips and all(s.check and s.resources and len(s.reason) >= 20 for s in skips)
    with pytest.raises(scan.SkipsError, match=r"reason: required.*\n.*resources: required"):
        scan.load_skips(
            write_skips(tmp_path, "skips:\n  - {check: CKV_GCP_66}\n  - {check: CKV_GCP_1, reason: x}\n")
        )
    with pytest.raises(scan.SkipsError, match="not a checkov check id"):
        scan.load_skips(
            write_skips(tmp_path, "skips:\n  - {check: GCP66, resources: [a], reason: " + "y" * 30 + "}\n")
        )
    table = scan.skips_table(skips)
    assert table.count("\n") == len(skips) + 1 and "CKV_GCP_66" in table


def finding(
    check: str = "CKV_GCP_66", resource: str = "google_container_cluster.gke-cluster", stack: str = "dev"
):
    return scan.Finding(stack, "terraform_plan", check, "", resource, "")


def test_skip_matching_by_check_resource_stack_and_values() -> None:
    skip = scan.Skip(
        check="CKV_GCP_66",
        resources=("google_container_cluster.*",),
        reason="opt-in",
        stacks=("dev",),
        when=(("binary_authorization.0.evaluation_mode", "DISABLED"),),
    )
    off = {"binary_authorization": [{"evaluation_mode": "DISABLED"}]}
    assert skip.matches(finding(), off)
    assert not skip.matches(
        finding(), {"binary_authorization": [{"evaluation_mode": "PROJECT_SINGLETON_POLICY_ENFORCE"}]}
    )
    assert not skip.matches(finding(), None)
    assert not skip.matches(finding(stack="prod"), off)
    assert not skip.matches(finding(check="CKV_GCP_65"), off)
    assert not skip.matches(finding(resource="google_compute_network.vpc"), off)


def test_collect_attributes_results_to_stacks_and_skips(tmp_path: Path) -> None:
    scan_dir = tmp_path / "checkov"
    (scan_dir / "dev" / "manifests").mkdir(parents=True)
    (scan_dir / "dev" / "tfplan.json").write_text(
        json.dumps(
            scan.to_terraform_plan(
                render_of(resource("gcp:container/cluster:Cluster", "gke-cluster", {"enableAutopilot": True}))
            )
        )
    )
    plan_file = str(scan_dir / "dev" / "tfplan.json")
    manifest = str(scan_dir / "dev" / "manifests" / "gpu-samples.job.smoke.yaml")
    reports = [
        {
            "check_type": "terraform_plan",
            "results": {
                "passed_checks": [{"check_id": "CKV_GCP_13", "file_abs_path": plan_file}],
                "failed_checks": [
                    {
                        "check_id": "CKV_GCP_69",
                        "resource": "google_container_cluster.gke-cluster",
                        "file_abs_path": plan_file,
                    },
                    {
                        "check_id": "CKV_GCP_65",
                        "resource": "google_container_cluster.gke-cluster",
                        "file_abs_path": plan_file,
                    },
                ],
                "parsing_errors": [],
            },
        },
        {
            "check_type": "kubernetes",
            "results": {
                "passed_checks": [],
                "failed_checks": [
                    {
                        "check_id": "CKV2_K8S_6",
                        "resource": "Pod.gpu-samples.smoke.app.kubernetes.io/name-smoke.app.kubernetes.io/v-",
                        "file_abs_path": manifest,
                    }
                ],
                "parsing_errors": [],
            },
        },
    ]
    autopilot_only = scan.Skip(
        "CKV_GCP_69", ("google_container_cluster.gke-cluster",), "r", when=(("enable_autopilot", True),)
    )
    never = scan.Skip("CKV_GCP_1", ("*",), "r")
    result = scan.collect(reports, ["dev"], [autopilot_only, never], scan_dir)
    assert result.passed == {("dev", "terraform_plan"): 1}
    assert [(f.check, f.framework, f.skip is not None) for f in result.findings] == [
        ("CKV_GCP_69", "terraform_plan", True),
        ("CKV_GCP_65", "terraform_plan", False),
        ("CKV2_K8S_6", "kubernetes", False),
    ]
    assert result.findings[2].resource == "Pod.gpu-samples.smoke", "labels cut off checkov's Pod names"
    assert [f.check for f in result.failures()] == ["CKV_GCP_65", "CKV2_K8S_6"]
    assert scan.unused_skips([autopilot_only, never], result) == [never]
    counts = scan.summary_json(result, ["dev"])["dev"]
    assert counts["terraform_plan"] == {
        "passed": 1,
        "failed": 2,
        "skipped": 1,
        "unskipped": [
            {"check": "CKV_GCP_65", "resource": "google_container_cluster.gke-cluster", "name": ""}
        ],
    }
    with pytest.raises(RuntimeError, match="outside"):
        scan.collect(
            [
                {
                    "check_type": "kubernetes",
                    "results": {"failed_checks": [{"file_abs_path": "/elsewhere/x.yaml"}]},
                }
            ],
            ["dev"],
            [],
            scan_dir,
        )


def test_prepare_writes_one_directory_per_stack(tmp_path: Path) -> None:
    render_dir = tmp_path / "render"
    (render_dir / "s1" / "manifests").mkdir(parents=True)
    (render_dir / "s1" / "render.json").write_text(
        json.dumps(render_of(resource("gcp:compute/network:Network", "network-vpc", {"name": "v"})))
    )
    (render_dir / "s1" / "manifests" / "a.yaml").write_text("kind: Namespace\n")
    stale = tmp_path / "checkov" / "gone"
    stale.mkdir(parents=True)
    (stale / "tfplan.json").write_text("{}")
    plans = scan.prepare(["s1"], render_dir, tmp_path / "checkov")
    assert not stale.exists(), "a stack rendered earlier must not be scanned again"
    assert plans["s1"] == tmp_path / "checkov" / "s1" / "tfplan.json"
    assert (tmp_path / "checkov" / "s1" / "manifests" / "a.yaml").read_text() == "kind: Namespace\n"
    assert values(json.loads(plans["s1"].read_text()), "google_compute_network.network-vpc") == {"name": "v"}
