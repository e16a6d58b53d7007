"""The TCPXO installer's host firewall rule (issue 27): it accepts inbound TCP only from the GPU NICs'
subnets, every one the all-reduce's Pods use for FasTrak's data, and not from the primary network;
no rule accepts TCP on every interface, and an earlier one is deleted."""

import ipaddress
import json
import shlex

import pytest

from tests.conftest import stack_render
from tools.offline import RunResult


@pytest.fixture(scope="module")
def train() -> RunResult:
    return stack_render("train")


def host_script(result: RunResult) -> str:
    (installer,) = [
        r
        for r in result.of_type("kubernetes:apps/v1:DaemonSet")
        if r.inputs["metadata"]["name"] == "nccl-tcpxo-installer"
    ]
    (step,) = [
        c
        for c in installer.inputs["spec"]["template"]["spec"]["initContainers"]
        if c["name"] == "pre-installation"
    ]
    assert step["command"][:6] == ["nsenter", "-at", "1", "--", "bash", "-c"]
    return step["command"][6]


def iptables_commands(script: str) -> list[list[str]]:
    """Every iptables invocation of the script, as its argument list (after the binary)."""
    commands = []
    for line in script.splitlines():
        for part in line.replace("||", ";").replace("&&", ";").split(";"):
            words = shlex.split(part.split("2>")[0]) if part.strip() else []
            words = [w for w in words if w not in ("while", "do", ":", "done")]
            if words and words[0].endswith("iptables"):
                commands.append(words[1:])
    return commands


def accepted_sources(script: str) -> list[str | None]:
    """The source range of each rule the script inserts (`-I INPUT ... -j ACCEPT`); None: any."""
    sources: list[str | None] = []
    for args in iptables_commands(script):
        if args[:2] == ["-I", "INPUT"] and args[-2:] == ["-j", "ACCEPT"]:
            assert "-i" not in args or "-s" in args
            sources.append(args[args.index("-s") + 1] if "-s" in args else None)
    return sources


def allreduce_networks(result: RunResult) -> dict[str, str]:
    """The all-reduce Pod's interfaces -> the Network each is on."""
    (jobset,) = result.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    template = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    interfaces = json.loads(template["metadata"]["annotations"]["networking.gke.io/interfaces"])
    return {i["interfaceName"]: i["network"] for i in interfaces}


def subnet_of_network(result: RunResult, network: str) -> str:
    (params,) = [
        r
        for r in result.of_type("kubernetes:networking.gke.io/v1:GKENetworkParamSet")
        if r.inputs["metadata"]["name"] == network
    ]
    (subnet,) = [
        r
        for r in result.of_type("gcp:compute/subnetwork:Subnetwork")
        if r.inputs["name"] == params.inputs["spec"]["vpcSubnet"]
    ]
    return subnet.inputs["ipCidrRange"]


def test_the_rule_accepts_tcp_from_every_gpu_nic_the_allreduce_uses_and_nothing_else(
    train: RunResult,
) -> None:
    script = host_script(train)
    sources = accepted_sources(script)
    assert sources and None not in sources, "a rule accepting TCP on every interface"
    networks = allreduce_networks(train)
    # FasTrak's data NICs (NCCL_FASTRAK_IFNAME eth1..eth8 in Google's profile): every non-primary one.
    gpu_nics = {name: net for name, net in networks.items() if net != "default"}
    assert sorted(gpu_nics) == [f"eth{i}" for i in range(1, 9)]
    gpu_subnets = {subnet_of_network(train, net) for net in gpu_nics.values()}
    assert set(sources) == gpu_subnets
    # A peer's address on each GPU NIC is accepted; one on the primary network (eth0: the node subnet,
    # NCCL_SOCKET_IFNAME's bootstrap) is not opened by this rule.
    for subnet in gpu_subnets:
        peer = next(ipaddress.ip_network(subnet).hosts())
        assert any(peer in ipaddress.ip_network(s) for s in sources if s)
    (nodes,) = [r for r in train.of_type("gcp:compute/subnetwork:Subnetwork") if r.name == "network-nodes"]
    node_peer = next(ipaddress.ip_network(nodes.inputs["ipCidrRange"]).hosts())
    assert not any(node_peer in ipaddress.ip_network(s) for s in sources if s)


def test_an_earlier_rule_on_every_interface_is_deleted_first(train: RunResult) -> None:
    commands = iptables_commands(host_script(train))
    assert commands[0] == ["-D", "INPUT", "-p", "tcp", "-m", "tcp", "-j", "ACCEPT"]
    # Each scoped rule is checked before it is inserted: a restarted installer adds none twice.
    inserted = [c for c in commands if c[0] == "-I"]
    checked = [c for c in commands if c[0] == "-C"]
    assert [c[1:] for c in inserted] == [c[1:] for c in checked]


def test_the_component_refuses_a_range_the_rule_cannot_be_made_from() -> None:
    from gke_gpu.core.validation import InvalidArgsError
    from gke_gpu.gpudirect.software import GpuDirectSoftware

    networks = [{"network": f"v{i}", "subnetwork": f"s{i}"} for i in range(8)]
    with pytest.raises(InvalidArgsError) as info:
        GpuDirectSoftware("s", flavor="TCPXO", node_networks=networks, gpudirect_cidr="192.168.0.1/16")
    assert "gpudirect_cidr: '192.168.0.1/16' is not allowed" in str(info.value)
