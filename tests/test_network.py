"""The network component alone."""

from __future__ import annotations

import pytest

from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.network.vpc import GkeNetwork, GkeNetworkArgs
from tools.offline import run_program

ARGS: GkeNetworkArgs = {
    "project": "test-project",
    "region": "us-central1",
    "name_prefix": "gpu-test",
    "subnet_cidr": "10.10.0.0/20",
    "pods_cidr": "10.16.0.0/14",
    "services_cidr": "10.20.0.0/20",
}


def declare(**overrides):
    def program():
        GkeNetwork("network", {**ARGS, **overrides})

    result = run_program({}, program=program)
    assert result.error is None, result.error
    return result


def test_custom_mode_vpc_with_secondary_ranges_and_private_google_access() -> None:
    result = declare()
    vpc = result.one("gcp:compute/network:Network").inputs
    assert vpc["autoCreateSubnetworks"] is False
    assert vpc["name"] == "gpu-test-vpc"
    subnet = result.one("gcp:compute/subnetwork:Subnetwork").inputs
    assert subnet["ipCidrRange"] == "10.10.0.0/20"
    assert subnet["privateIpGoogleAccess"] is True
    assert subnet["region"] == "us-central1"
    assert {r["rangeName"]: r["ipCidrRange"] for r in subnet["secondaryIpRanges"]} == {
        "pods": "10.16.0.0/14",
        "services": "10.20.0.0/20",
    }


def test_flow_logs_on_the_subnet_follow_the_sampling() -> None:
    subnet = declare().one("gcp:compute/subnetwork:Subnetwork").inputs
    assert subnet["logConfig"] == {
        "aggregationInterval": "INTERVAL_5_SEC",
        "flowSampling": 0.5,
        "metadata": "INCLUDE_ALL_METADATA",
    }
    sampled = declare(flow_log_sampling=0.1).one("gcp:compute/subnetwork:Subnetwork").inputs
    assert sampled["logConfig"]["flowSampling"] == 0.1
    # 0 turns them off: no log_config block, which the provider sends as "disabled".
    for off in (0, 0.0):
        assert (
            "logConfig" not in declare(flow_log_sampling=off).one("gcp:compute/subnetwork:Subnetwork").inputs
        )


def test_cloud_nat_for_private_nodes_covers_only_this_subnet() -> None:
    result = declare()
    nat = result.one("gcp:compute/routerNat:RouterNat").inputs
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat["subnetworks"][0]["sourceIpRangesToNats"] == ["ALL_IP_RANGES"]
    assert nat["router"] == "gpu-test-router"
    assert result.one("gcp:compute/router:Router").inputs["region"] == "us-central1"


def test_no_nat_without_private_nodes_and_no_firewall_rules() -> None:
    result = declare(cloud_nat=False)
    assert result.of_type("gcp:compute/routerNat:RouterNat") == []
    assert result.of_type("gcp:compute/router:Router") == []
    assert result.of_type("gcp:compute/firewall:Firewall") == []


def test_children_are_parented_to_the_component() -> None:
    result = declare()
    component = result.one("gke-gpu:index:GkeNetwork")
    children = {r.type for r in result.children_of(component)}
    assert children == {
        "gcp:compute/network:Network",
        "gcp:compute/subnetwork:Subnetwork",
        "gcp:compute/router:Router",
        "gcp:compute/routerNat:RouterNat",
    }


def test_ranges_left_out_take_the_stack_files_defaults() -> None:
    """The args and the stack file's network section are one model (VpcSettings): same defaults."""
    from gke_gpu.network.model import NetworkConfig

    def program():
        GkeNetwork("network", {"project": "test-project", "region": "us-central1", "name_prefix": "gpu-test"})

    result = run_program({}, program=program)
    assert result.error is None, result.error
    subnet = result.one("gcp:compute/subnetwork:Subnetwork").inputs
    section = NetworkConfig()
    assert subnet["ipCidrRange"] == section.subnet_cidr == "10.10.0.0/20"
    assert {r["rangeName"]: r["ipCidrRange"] for r in subnet["secondaryIpRanges"]} == {
        "pods": section.pods_cidr,
        "services": section.services_cidr,
    }


def test_a_range_with_surrounding_spaces_is_trimmed_as_in_a_stack_file() -> None:
    subnet = declare(subnet_cidr=" 10.10.0.0/20 ").one("gcp:compute/subnetwork:Subnetwork").inputs
    assert subnet["ipCidrRange"] == "10.10.0.0/20"


def test_a_proxy_only_subnet_when_asked() -> None:
    result = declare(proxy_only_cidr="10.10.16.0/23")
    proxy = result.one("gcp:compute/subnetwork:Subnetwork", "network-proxy-only").inputs
    assert proxy["name"] == "gpu-test-proxy" and proxy["ipCidrRange"] == "10.10.16.0/23"
    assert (proxy["purpose"], proxy["role"], proxy["region"]) == (
        "REGIONAL_MANAGED_PROXY",
        "ACTIVE",
        "us-central1",
    )
    assert "logConfig" not in proxy and "secondaryIpRanges" not in proxy
    component = result.one("gke-gpu:index:GkeNetwork")
    assert result.one("gcp:compute/subnetwork:Subnetwork", "network-proxy-only").parent == component.urn
    assert [r.name for r in declare().of_type("gcp:compute/subnetwork:Subnetwork")] == ["network-nodes"]


def test_the_proxy_only_range_is_checked_against_the_others() -> None:
    with pytest.raises(InvalidArgsError) as refused:
        GkeNetwork.check_args("network", {**ARGS, "proxy_only_cidr": "10.16.0.0/27"})
    text = str(refused.value)
    assert "proxy_only_cidr: 10.16.0.0/27 is too small; a proxy-only subnet has at least 64 addresses" in text
    assert "proxy_only_cidr: 10.16.0.0/27 overlaps pods_cidr 10.16.0.0/14" in text
    assert GkeNetwork.check_args("network", {**ARGS, "proxy_only_cidr": "10.10.16.0/23"})
