"""What a workload declares to get devices from NVIDIA's DRA driver, as plain manifests (camelCase):
a ComputeDomain and its IMEX channel claim for a multi-node job on an NVLink rack, and a
ResourceClaimTemplate for GPUs on a pool whose GPUs the DRA driver hands out instead of GKE's device
plugin. The Pod parts that reference them (`resourceClaims`, a container's `resources.claims`) are
functions here, so every workload that claims devices (the samples, the all-reduce, serving) builds
them the same way and another claim (DRANET's NICs) adds to the same lists.

Sources (facts, not code):

* kubernetes-sigs/dra-driver-nvidia-gpu (formerly NVIDIA/k8s-dra-driver-gpu) tag v0.4.0 (commit
  6910a2be, 2026-05-15): deployments/helm/dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomains.yaml
  (ComputeDomain `resource.nvidia.com/v1beta1`: `spec.numNodes`, `spec.channel.resourceClaimTemplate.name`,
  `spec.channel.allocationMode` Single|All, the spec immutable) and templates/deviceclass-gpu.yaml
  (the DeviceClass `gpu.nvidia.com`, created by the chart when `resources.gpus.enabled`).
* GoogleCloudPlatform/cluster-toolkit@1047080375afbb44da4b596be314634e7486af4a
  examples/gke-a4x/nccl-jobset-example.yaml: a ComputeDomain with `numNodes: 2` and a channel
  template, the Pods' `resourceClaims` (`resourceClaimTemplateName`) and the container's
  `resources.claims`.
* Kubernetes `resource.k8s.io/v1` (GA in 1.34): ResourceClaimTemplate `spec.spec.devices.requests[]`
  with `exactly.deviceClassName`, `allocationMode: ExactCount`, `count`.
"""

from typing import Any

COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
COMPUTE_DOMAIN_KIND = "ComputeDomain"
RESOURCE_API = "resource.k8s.io/v1"
# The DeviceClass the DRA driver's chart creates for whole GPUs (templates/deviceclass-gpu.yaml).
GPU_DEVICE_CLASS = "gpu.nvidia.com"
# The Pod-level claim names the workloads use (a Pod's resourceClaims[].name, a container's
# resources.claims[].name).
CHANNEL_CLAIM = "compute-domain-channel"
# The DeviceClass of the channel template the driver's controller makes for a ComputeDomain: one
# request `channel`, `exactly.deviceClassName` this class, no allocation mode (so the API's default,
# ExactCount of 1): templates/compute-domain-workload-claim-template.tmpl.yaml and
# cmd/compute-domain-controller/resourceclaimtemplate.go:388 at v0.4.0; the chart creates the class
# (templates/deviceclass-compute-domain-default-channel.yaml).
CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
GPU_CLAIM = "gpus"
# The GKE accelerators sold as NVL72 racks (A4X: GB200; A4X Max: GB300), whose multi-node jobs reach
# the other VMs' GPUs over NVLink only through a ComputeDomain (IMEX). The rack pool model of issue 28
# item 1 will say this per pool; until then the accelerator does.
RACK_ACCELERATORS = frozenset({"nvidia-gb200", "nvidia-gb300"})
# The accelerators of DRA pools for which Google publishes no driver installer DaemonSet (A4X Max:
# none at container-engine-accelerators@992db812; dra/driver_installer.py): the user installs the driver.
NO_INSTALLER_ACCELERATORS = frozenset({"nvidia-gb300"})
# GKE taints Arm nodes kubernetes.io/arch=arm64:NoSchedule; cluster-toolkit's A4X NCCL test and its DRA
# driver values tolerate it (examples/gke-a4x/nccl-jobset-example.yaml, modules/management/kubectl-apply).
ARM64_TOLERATION = {
    "key": "kubernetes.io/arch",
    "operator": "Equal",
    "value": "arm64",
    "effect": "NoSchedule",
}


def is_rack(accelerator: str) -> bool:
    """True for an accelerator whose multi-node jobs need a ComputeDomain."""
    return accelerator in RACK_ACCELERATORS


def channel_template_name(compute_domain: str) -> str:
    """The ResourceClaimTemplate the DRA driver's controller creates for a ComputeDomain's channel."""
    return f"{compute_domain}-channel"


def compute_domain_spec(compute_domain: str, nodes: int) -> dict[str, Any]:
    """A ComputeDomain's spec: one IMEX channel per Pod, through the template the controller makes.

    `numNodes` is the job's node count. In v0.4.0 it no longer holds Pods back (IMEX daemons start
    at once, `featureGates.IMEXDaemonsWithDNSNames` being on by default): it only sets when the
    ComputeDomain's status turns Ready, which is what `kubectl get computedomain` shows. The CRD
    marks it deprecated for the next API version."""
    return {
        "numNodes": nodes,
        "channel": {"resourceClaimTemplate": {"name": channel_template_name(compute_domain)}},
    }


def gpu_claim_template_spec(gpus: int) -> dict[str, Any]:
    """A ResourceClaimTemplate's `spec` asking for `gpus` whole GPUs of the driver's DeviceClass."""
    return {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": GPU_CLAIM,
                        "exactly": {
                            "deviceClassName": GPU_DEVICE_CLASS,
                            "allocationMode": "ExactCount",
                            "count": gpus,
                        },
                    }
                ]
            }
        }
    }


def gpu_claim_template_name(gpus: int) -> str:
    """The template of `gpus` GPUs a namespace holds (one per count its workloads ask for)."""
    return f"gpu-{gpus}" if gpus != 1 else "gpu"


def pod_claim(claim: str, template: str) -> dict[str, str]:
    """A Pod's `resourceClaims` entry: a claim made per Pod from `template`."""
    return {"name": claim, "resourceClaimTemplateName": template}


def container_claim(claim: str) -> dict[str, str]:
    """A container's `resources.claims` entry: the container uses the Pod's claim `claim`."""
    return {"name": claim}


def channel_claims(compute_domain: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """A Pod's `resourceClaims` and its NCCL container's `resources.claims` for the IMEX channel of
    `compute_domain` (cluster-toolkit's A4X NCCL test's shape)."""
    return (
        [pod_claim(CHANNEL_CLAIM, channel_template_name(compute_domain))],
        [container_claim(CHANNEL_CLAIM)],
    )
