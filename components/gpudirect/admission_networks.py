"""Which namespaces may reach the GPU networks: the admission rules that keep a team's Pods off the GPU
NICs of pools it has no quota on, as ValidatingAdmissionPolicy specs (GpuDirectAdmission declares them).

A Pod reaches a GPU NIC two ways: GKE multi-networking, by naming the NIC's Network in its
`networking.gke.io/interfaces` annotation (a JSON list of `{"interfaceName", "network"}`: GKE "Set up
multi-network support for Pods"; GoogleCloudPlatform/gke-networking-api), and GKE's managed DRANET, by a
ResourceClaim on the DeviceClass `mrdma.google.com` (or `netdev.google.com`: GKE "Allocate network
resources by using GKE managed DRANET"). Nothing in Kubernetes limits either by namespace, and a
Device-type Network's NIC is outside NetworkPolicy (no policy is written for it: docs/security.md), so:

* `gke-gpu-gpu-networks`, bound to every namespace: an annotation naming a GPU Network only in the
  namespaces listed for it. The annotation is JSON, which CEL cannot parse: a Network's name is a
  Kubernetes name, so wherever the JSON names it, the text `"<name>"` appears verbatim unless written
  with escapes, and an annotation with a backslash is refused (no Network or interface name needs one);
  the check is on the text, whatever key the name sits under (Go's JSON decoding matches keys without
  regard to case).
* `gke-gpu-gpu-nic-claims`, bound to every namespace: a ResourceClaim or ResourceClaimTemplate
  (resource.k8s.io/v1, and the other versions through the default matchPolicy Equivalent) requesting a
  DRANET DeviceClass only in the namespaces listed.
"""

from typing import Any

from .admission_common import cel, on_resources

NETWORK_POLICY = "gke-gpu-gpu-networks"
NIC_CLAIM_POLICY = "gke-gpu-gpu-nic-claims"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
# GKE's managed DRANET DeviceClasses (gpudirect/flavors.py DRANET_DEVICE_CLASS is the first).
DRANET_DEVICE_CLASSES = ("mrdma.google.com", "netdev.google.com")


def network_policy(allowed: dict[str, list[str]]) -> dict[str, Any]:
    """The policy's spec: each Network of `allowed` (name -> the namespaces that may attach it) named in
    `networking.gke.io/interfaces` only there."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for network, namespaces in allowed.items():
        groups.setdefault(tuple(sorted(set(namespaces))), []).append(network)
    validations = [
        {
            "expression": "!variables.interfaces.contains('\\\\')",
            "message": f"{INTERFACES_ANNOTATION} is written without JSON escapes (no Network or interface "
            "name needs one)",
        }
    ]
    for allowed_in, networks in groups.items():
        names = sorted(networks)
        validations.append(
            {
                "expression": f"{cel(names)}.all(n, !variables.interfaces.contains('\"' + n + '\"')) || "
                f"request.namespace in {cel(list(allowed_in))}",
                "message": f"the GPU networks {', '.join(names)} may be attached ({INTERFACES_ANNOTATION}) "
                f"only in {', '.join(allowed_in) or 'no namespace'}: the namespaces of the teams with quota "
                "on their pools, and of the all-reduce and the model servers that use them",
            }
        )
    return {
        **on_resources(["CREATE", "UPDATE"], ["pods"]),
        "matchConditions": [
            {
                "name": "has-interfaces-annotation",
                "expression": "has(object.metadata.annotations) && "
                f"{cel(INTERFACES_ANNOTATION)} in object.metadata.annotations",
            }
        ],
        "variables": [
            {"name": "interfaces", "expression": f"object.metadata.annotations[{cel(INTERFACES_ANNOTATION)}]"}
        ],
        "validations": validations,
    }


def _requests_dranet(spec: str) -> str:
    """CEL: claim spec `spec` (a ResourceClaimSpec) requests none of DRANET's DeviceClasses."""
    classes = cel(DRANET_DEVICE_CLASSES)
    return (
        f"!has({spec}.devices) || !has({spec}.devices.requests) || {spec}.devices.requests.all(r, "
        f"!(has(r.exactly) && r.exactly.deviceClassName in {classes}) && "
        f"!(has(r.firstAvailable) && r.firstAvailable.exists(f, f.deviceClassName in {classes})))"
    )


def nic_claim_policy(namespaces: list[str]) -> dict[str, Any]:
    """The policy's spec: claims of DRANET's DeviceClasses only in `namespaces`."""
    return {
        **on_resources(
            ["CREATE", "UPDATE"],
            ["resourceclaims", "resourceclaimtemplates"],
            group="resource.k8s.io",
        ),
        "variables": [
            {
                "name": "claim",
                # A template's claim spec is its required spec.spec.
                "expression": "object.kind == 'ResourceClaimTemplate' ? object.spec.spec : object.spec",
            }
        ],
        "validations": [
            {
                "expression": f"{_requests_dranet('variables.claim')} || "
                f"request.namespace in {cel(list(namespaces))}",
                "message": f"claims of the GPU NICs ({', '.join(DRANET_DEVICE_CLASSES)}) are allowed only in "
                f"{', '.join(namespaces) or 'no namespace'}: the namespaces of the teams with quota on "
                "the DRANET pools, and of the all-reduce and the model servers that use them",
            }
        ],
    }
