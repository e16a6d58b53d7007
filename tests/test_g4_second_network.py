"""G4's second network (issue 28, item 5): `gpuPools[].secondNetwork` declares what cluster-toolkit's
examples/gke-g4 declares (a VPC, a subnet, a firewall rule, the pool's additional node network, the
cluster's multi-networking, the GKENetworkParamSet and Network), and nothing changes without it."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from gke_gpu.gpudirect.flavors import DEFAULT_GPUDIRECT_CIDR, FLAVORS, subnet_range
from gke_gpu.gpudirect.g4_network import G4_NIC, G4SecondNetwork, used_slots
from tests.conftest import STANDARD_CLUSTER, config_error, render, stack_config
from tests.kubernetes_schemas import validate
from tools.plan import kubernetes_objects, to_document

G4 = {"name": "g4", "accelerator": "nvidia-rtx-pro-6000", "gpusPerNode": 8, "maxNodes": 2}
NODE_POOL = "gcp:container/nodePool:NodePool"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
CLUSTER = "gcp:container/cluster:Cluster"


def keys(*pools: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {"cluster": {**STANDARD_CLUSTER, **cluster}, "gpuPools": list(pools)}


@pytest.fixture(scope="module")
def wired() -> Any:
    return render(stack_config(**keys({**G4, "secondNetwork": True})))


@pytest.fixture(scope="module")
def plain() -> Any:
    return render(stack_config(**keys(G4)))


def test_the_stack_creates_the_blueprints_vpc_subnet_and_firewall_rule(wired: Any) -> None:
    vpc = wired.one(NETWORK, "g4-second-network-vpc").inputs
    assert vpc["name"] == "gpu-test-g4-net-1"
    assert vpc["mtu"] == 8896 and vpc["autoCreateSubnetworks"] is False
    subnet = wired.one(SUBNET, "g4-second-network-subnet").inputs
    assert subnet["name"] == "gpu-test-g4-sub-1"
    assert subnet["ipCidrRange"] == "192.168.216.0/21"
    assert subnet["region"] == "us-central1"
    rule = wired.one(FIREWALL, "g4-second-network-internal").inputs
    assert rule["name"] == "gpu-test-g4-net-1-internal"
    assert rule["direction"] == "INGRESS" and rule["sourceRanges"] == ["192.168.216.0/21"]
    assert sorted(a["protocol"] for a in rule["allows"]) == ["icmp", "tcp", "udp"]


def test_the_pool_attaches_it_and_the_cluster_turns_multi_networking_on(wired: Any) -> None:
    pool = wired.one(NODE_POOL, "gpu-g4-pool").inputs
    assert pool["networkConfig"]["additionalNodeNetworkConfigs"] == [
        {"network": "gpu-test-g4-net-1", "subnetwork": "gpu-test-g4-sub-1"}
    ]
    (summary,) = wired.outputs["gpuPools"]
    assert summary["secondNetwork"] == {"network": "g4-gvnic-1"}
    cluster = wired.one(CLUSTER).inputs
    assert cluster["enableMultiNetworking"] is True
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"


def test_the_network_objects_are_the_blueprints_and_validate_against_the_vendored_crds(wired: Any) -> None:
    objects = [o for o in kubernetes_objects(to_document(wired)) if o["apiVersion"] == "networking.gke.io/v1"]
    by_kind = {o["kind"]: o for o in objects}
    assert sorted(by_kind) == ["GKENetworkParamSet", "Network"] and len(objects) == 2
    assert by_kind["GKENetworkParamSet"]["metadata"]["name"] == "g4-gvnic-1"
    assert by_kind["GKENetworkParamSet"]["spec"] == {
        "vpc": "gpu-test-g4-net-1",
        "vpcSubnet": "gpu-test-g4-sub-1",
        "deviceMode": "NetDevice",
    }
    assert by_kind["Network"]["spec"] == {
        "type": "Device",
        "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": "g4-gvnic-1"},
    }
    for obj in objects:
        validate(obj)


def test_a_g4_pool_without_the_key_renders_exactly_as_before(plain: Any) -> None:
    pool = plain.one(NODE_POOL, "gpu-g4-pool").inputs
    assert "networkConfig" not in pool or not pool["networkConfig"].get("additionalNodeNetworkConfigs")
    assert "enableMultiNetworking" not in plain.one(CLUSTER).inputs
    assert "secondNetwork" not in plain.outputs["gpuPools"][0]
    assert [r.name for r in plain.of_type(NETWORK)] == ["network-vpc"]
    assert not [r for r in plain.resources if r.type == "gke-gpu:index:G4SecondNetwork"]


def test_turning_it_on_adds_resources_and_changes_only_the_pool_and_cluster(plain: Any, wired: Any) -> None:
    before = {r.urn: r.inputs for r in plain.resources}
    after = {r.urn: r.inputs for r in wired.resources}
    assert set(before) <= set(after)
    changed = {urn.rsplit("::", 1)[1] for urn in before if before[urn] != after[urn]}
    assert changed == {"gke-cluster", "gpu-g4-pool"}, changed
    added = sorted(urn.rsplit("::", 1)[1] for urn in set(after) - set(before))
    assert added == sorted(
        [
            "g4-second-network",
            "g4-second-network-vpc",
            "g4-second-network-subnet",
            "g4-second-network-internal",
            "g4-second-network-params",
            "g4-second-network-network",
            # Only the teams with quota on the G4 pool may attach its Network (none here).
            "gpudirect-admission",
            "gpudirect-admission-gke-gpu-gpu-networks",
            "gpudirect-admission-gke-gpu-gpu-networks-binding",
        ]
    )


def test_its_slot_of_the_gpudirect_range_is_no_flavours() -> None:
    assert G4_NIC.slot is not None and G4_NIC.slot not in used_slots()
    mine = ipaddress.ip_network(subnet_range(DEFAULT_GPUDIRECT_CIDR, G4_NIC))
    for spec in FLAVORS.values():
        for nic in spec.created_subnets:
            assert not mine.overlaps(ipaddress.ip_network(subnet_range(DEFAULT_GPUDIRECT_CIDR, nic)))


def test_it_follows_the_stacks_gpudirect_range() -> None:
    pools = keys({**G4, "secondNetwork": True})
    result = render(stack_config(**pools, network={"gpudirectCidr": "10.200.0.0/16"}))
    assert result.one(SUBNET, "g4-second-network-subnet").inputs["ipCidrRange"] == "10.200.216.0/21"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            keys({"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1, "secondNetwork": True}),
            "gke-gpu:gpuPools[0].secondNetwork: true is not allowed on nvidia-l4",
        ),
        (
            {
                "cluster": {**STANDARD_CLUSTER, "mode": "autopilot"},
                "gpuPools": [{**G4, "secondNetwork": True}],
            },
            "gke-gpu:gpuPools[0].secondNetwork: not allowed on Autopilot",
        ),
        (
            keys({**G4, "secondNetwork": True}, minimumVersion="1.32.10-gke.1000000"),
            "gke-gpu:gpuPools[0].secondNetwork: secondNetwork (a G4 node pool) needs GKE 1.32.11-gke.1174000",
        ),
        (
            keys({**G4, "maxNodes": 2, "secondNetwork": True, "capacityLadder": ["spot", "onDemand"]}),
            "gke-gpu:gpuPools[0].secondNetwork: true is not allowed with capacityLadder",
        ),
    ],
    ids=["other-accelerator", "autopilot", "version", "ladder"],
)
def test_it_is_refused_by_key(raw: dict[str, Any], expected: str) -> None:
    message = config_error(raw)
    assert expected in message, message


def test_the_range_is_checked_against_the_clusters_ranges() -> None:
    message = config_error(
        {
            **keys({**G4, "secondNetwork": True}),
            "network": {"subnetCidr": "192.168.0.0/20", "gpudirectCidr": "192.168.0.0/16"},
        }
    )
    assert "gke-gpu:network.gpudirectCidr: 192.168.0.0/16 overlaps" in message, message


def test_the_component_refuses_a_bad_range() -> None:
    with pytest.raises(Exception, match=r"- cidr: 192.168.0.0/24 is too small") as info:
        G4SecondNetwork.check_args(
            "g",
            {
                "project": "my-project",
                "region": "us-central1",
                "name_prefix": "c",
                "cidr": "192.168.0.0/24",
                "cluster_ranges": ["10.0.0.0/8"],
            },
        )
    assert "1 problem(s)" in str(info.value)


def test_a_fleet_worker_declares_it_under_its_own_names() -> None:
    from tests.test_fleet import fleet_config, fleet_raw

    raw = fleet_raw()
    worker = raw["fleet"]["workers"][1]
    worker["gpuPools"].append({**G4, "zones": ["us-central1-b"], "secondNetwork": True})
    result = render(fleet_config(raw), stack="fleet")
    vpc = result.one(NETWORK, "us-central-g4-second-network-vpc").inputs
    assert vpc["name"] == "gpu-fleet-us-central-g4-net-1"
    pool = result.one(NODE_POOL, "us-central-gpu-g4-pool").inputs
    assert pool["networkConfig"]["additionalNodeNetworkConfigs"] == [
        {"network": "gpu-fleet-us-central-g4-net-1", "subnetwork": "gpu-fleet-us-central-g4-sub-1"}
    ]
    clusters = {r.inputs["name"]: r.inputs for r in result.of_type(CLUSTER)}
    assert clusters["gpu-fleet-us-central"]["enableMultiNetworking"] is True
    assert "enableMultiNetworking" not in clusters["gpu-fleet-us-east"]
