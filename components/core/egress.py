"""Egress NetworkPolicy rules the namespaces share: DNS, the metadata server, HTTPS to addresses
outside the VPC, the namespace's own Pods, and a namespace's default-deny-egress policy.

What each rule allows, and why (docs/security.md, "Egress"):
- DNS: GKE's resolvers, UDP and TCP 53 only. kube-dns's Pods (`kube-system`, `k8s-app: kube-dns`) on a
  Standard cluster; NodeLocal DNSCache's link-local address (169.254.20.10, the addon's default) where
  it runs (always on Autopilot; on by default on Standard from 1.34.1-gke.3720000: GKE's "Set up
  NodeLocal DNSCache"); its Pods (`k8s-app: node-local-dns`) in case Dataplane V2 sends the query to
  the Pod rather than the address (UNVERIFIED); and the metadata server's address (169.254.169.254),
  where Cloud DNS for GKE answers (Autopilot's only provider: GKE's "About service discovery").
- the metadata server, for Workload Identity: 169.254.169.254 port 80, where Pods ask, and the GKE
  metadata server itself, 169.254.169.252 port 988 (GKE's network policy page, "Requirements and
  limitations", as remembered and as public manifests for GKE allow it: the exact wording is
  UNVERIFIED here).
- HTTPS to addresses outside private ranges: Google's APIs (the subnet's Private Google Access routes
  their public addresses; no private.googleapis.com zone is declared, so there is no smaller range)
  and Hugging Face's CDN, whose addresses no one can list. Private, shared (100.64/10) and link-local
  ranges are left out, so the rule opens no Pod, Service, node or metadata address of the VPC.
"""

import pulumi_kubernetes as k8s

DNS_PORT = 53
NODELOCAL_DNS_CIDR = "169.254.20.10/32"
METADATA_CIDR = "169.254.169.254/32"
# Cloud DNS for GKE answers on the metadata server's address.
CLOUD_DNS_CIDR = METADATA_CIDR
METADATA_PORT = 80
GKE_METADATA_SERVER_CIDR = "169.254.169.252/32"
GKE_METADATA_SERVER_PORT = 988
DNS_POD_APPS = ("kube-dns", "node-local-dns")
HTTPS_PORT = 443
ANY_IPV4 = "0.0.0.0/0"
# RFC 1918, RFC 6598 (shared address space, which GKE accepts for Pod ranges) and link-local.
NON_PUBLIC_IPV4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")
DEFAULT_DENY_EGRESS_POLICY = "default-deny-egress"


def _ports(protocols: tuple[str, ...], port: int) -> list[k8s.networking.v1.NetworkPolicyPortArgs]:
    return [k8s.networking.v1.NetworkPolicyPortArgs(protocol=p, port=port) for p in protocols]


def _ip(cidr: str, excluding: list[str] | None = None) -> k8s.networking.v1.NetworkPolicyPeerArgs:
    return k8s.networking.v1.NetworkPolicyPeerArgs(
        ip_block=k8s.networking.v1.IPBlockArgs(cidr=cidr, except_=excluding or None)
    )


def dns_egress_rule() -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """DNS (UDP and TCP 53) to GKE's resolvers only: kube-dns, NodeLocal DNSCache, Cloud DNS."""
    dns_pods = k8s.networking.v1.NetworkPolicyPeerArgs(
        namespace_selector=k8s.meta.v1.LabelSelectorArgs(
            match_labels={"kubernetes.io/metadata.name": "kube-system"}
        ),
        pod_selector=k8s.meta.v1.LabelSelectorArgs(
            match_expressions=[
                k8s.meta.v1.LabelSelectorRequirementArgs(
                    key="k8s-app", operator="In", values=list(DNS_POD_APPS)
                )
            ]
        ),
    )
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[dns_pods, _ip(NODELOCAL_DNS_CIDR), _ip(CLOUD_DNS_CIDR)],
        ports=_ports(("UDP", "TCP"), DNS_PORT),
    )


def metadata_server_egress_rules() -> list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]:
    """The metadata server, for Workload Identity's tokens: where Pods ask (169.254.169.254:80) and
    the GKE metadata server that answers (169.254.169.252:988)."""
    return [
        k8s.networking.v1.NetworkPolicyEgressRuleArgs(
            to=[_ip(METADATA_CIDR)], ports=_ports(("TCP",), METADATA_PORT)
        ),
        k8s.networking.v1.NetworkPolicyEgressRuleArgs(
            to=[_ip(GKE_METADATA_SERVER_CIDR)], ports=_ports(("TCP",), GKE_METADATA_SERVER_PORT)
        ),
    ]


def public_https_egress_rule() -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """HTTPS (TCP 443) to any public IPv4 address: Google's APIs and model hubs, nothing in the VPC."""
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[_ip(ANY_IPV4, list(NON_PUBLIC_IPV4))], ports=_ports(("TCP",), HTTPS_PORT)
    )


def pods_egress_rule(
    match_labels: dict[str, str] | None = None,
) -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """Any port of the namespace's Pods (those with `match_labels`; all of them without)."""
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[
            k8s.networking.v1.NetworkPolicyPeerArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=match_labels or None)
            )
        ]
    )


def cidr_egress_rule(
    cidr: str, excluding: list[str], ports: list[int], protocol: str
) -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """Egress to a range (less `excluding`) on `ports` (every port of `protocol` without any)."""
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[_ip(cidr, excluding)],
        ports=[k8s.networking.v1.NetworkPolicyPortArgs(protocol=protocol, port=p) for p in ports]
        or [k8s.networking.v1.NetworkPolicyPortArgs(protocol=protocol)],
    )


def egress_policy_spec(
    rules: list[k8s.networking.v1.NetworkPolicyEgressRuleArgs], match_labels: dict[str, str] | None = None
) -> k8s.networking.v1.NetworkPolicySpecArgs:
    """An Egress policy for the namespace's Pods with `match_labels` (all without): once any policy
    selects a Pod for egress, it may send only what some policy's rules allow."""
    return k8s.networking.v1.NetworkPolicySpecArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=match_labels or None),
        policy_types=["Egress"],
        egress=rules or None,
    )
