"""Kubernetes NetworkPolicy egress, evaluated over rendered policies (kubernetes.io "Network Policies":
a Pod selected by no Egress policy sends anything; one selected by some may send only what one of
their rules allows; rules add up; a rule without `to` allows every destination, one without `ports`
every port; `ipBlock` matches addresses outside the cluster's Pods, less its `except`)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

# What every namespace's Pods may ask GKE's resolvers, as rendered (core/egress.py says why).
EGRESS_TO_DNS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {
                "matchExpressions": [
                    {"key": "k8s-app", "operator": "In", "values": ["kube-dns", "node-local-dns"]}
                ]
            },
        },
        {"ipBlock": {"cidr": "169.254.20.10/32"}},
        {"ipBlock": {"cidr": "169.254.169.254/32"}},
    ],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}


@dataclass(frozen=True)
class Pod:
    """A destination Pod: its namespace and labels."""

    namespace: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def namespace_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.namespace}


KUBE_DNS = Pod("kube-system", {"k8s-app": "kube-dns"})


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector's match (an empty or absent one selects everything)."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for requirement in selector.get("matchExpressions") or []:
        key, operator, values = requirement["key"], requirement["operator"], requirement.get("values", [])
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _peer_matches(peer: dict[str, Any], source_namespace: str, to: Pod | str) -> bool:
    if "ipBlock" in peer:
        if isinstance(to, Pod):
            return False
        address = ipaddress.ip_address(to)
        block = peer["ipBlock"]
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(e) for e in block.get("except") or []
        )
    if not isinstance(to, Pod):
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], to.namespace_labels):
            return False
    elif to.namespace != source_namespace:
        return False
    return selects(peer.get("podSelector"), to.labels)


def _port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p or p["port"] == port or (p.get("endPort") and p["port"] <= port <= p["endPort"]):
            return True
    return False


def egress_allowed(
    policies: list[dict[str, Any]],
    namespace: str,
    labels: dict[str, str],
    to: Pod | str,
    port: int,
    protocol: str = "TCP",
) -> bool:
    """Whether a Pod (`labels` in `namespace`) may send to `to` (a Pod, or an IP address) on `port`,
    under the rendered NetworkPolicy objects `policies` (every namespace's)."""
    selecting = [
        p["spec"]
        for p in policies
        if p["metadata"]["namespace"] == namespace
        and "Egress" in p["spec"].get("policyTypes", [])
        and selects(p["spec"].get("podSelector"), labels)
    ]
    if not selecting:
        return True
    for spec in selecting:
        for rule in spec.get("egress") or []:
            peers = rule.get("to")
            if (not peers or any(_peer_matches(peer, namespace, to) for peer in peers)) and _port_matches(
                rule.get("ports"), port, protocol
            ):
                return True
    return False


def reaches_dns(policies: list[dict[str, Any]], namespace: str, labels: dict[str, str]) -> bool:
    """Every resolver GKE may answer from, on UDP and TCP 53."""
    resolvers: list[Pod | str] = [KUBE_DNS, "169.254.20.10", "169.254.169.254"]
    return all(
        egress_allowed(policies, namespace, labels, r, 53, protocol)
        for r in resolvers
        for protocol in ("UDP", "TCP")
    )
