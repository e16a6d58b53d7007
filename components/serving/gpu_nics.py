"""A model server's Pods on a GPUDirect RDMA pool's GPU NICs (A3 Ultra, A4, A4X, A4X Max): the NICs through
the same parts as a training Pod (gpudirect/pod_parts.py: the multi-networking annotations; gpudirect/
flavors.py: DRANET's counted claim), and the environment an inference server needs on them.

What a Pod gets, and why:
- multiNetwork pools: the `networking.gke.io/default-interface` and `networking.gke.io/interfaces`
  annotations of `gpudirect_pod_parts` (eth0 on the Pod network, then every GPU NIC). A Network of
  deviceMode RDMA gives its NIC to one Pod of the node, so only a Pod that takes the node's every GPU
  can have them (pd_rules refuses a smaller one).
- dranet pools: a ResourceClaimTemplate `rdma-<n>` in the service's namespace (ExactCount n of
  `mrdma.google.com`, counted_claim_template_spec: the teams' and the all-reduce's template), n the
  Pod's share of the node's NICs (a whole node's Pod: every NIC; one GPU of an A3 Ultra: one NIC),
  each Pod its own claim. Which NIC a Pod gets is the DRA scheduler's pick, not its GPUs' PCIe root:
  llm-d's `gke-rdma-template` pairs each GPU with a NIC on its root (DRA GPUs), not built here.
- no gIB mount: the server's NCCL (its image's) runs its own IB transport over the NICs, and the gIB
  plugin GKE's installer puts in the driver's directory is turned off (NCCL_NET_PLUGIN "" and
  NCCL_TUNER_PLUGIN none), as llm-d's GKE overlays do ("gIB is generally not required for inference
  workloads", llm-d v0.9.0 guides/recipes/modelserver/components/disable-gke-nccl-tuner-patch);
  NCCL's and Gloo's bootstrap sockets stay on eth0 (llm-d's wide-EP manifests).
- no added capability, as llm-d's A3 Ultra P/D overlay and Google's RDMA test Pods (llm-d's A4X
  overlay adds IPC_LOCK and NET_ADMIN: UNVERIFIED whether needed, not added).

Sources: llm-d/llm-d@1aecf03f guides/pd-disaggregation/modelserver/gpu/vllm/gke/{base,a4x,a4xmax};
GoogleCloudPlatform/container-engine-accelerators@992db812 gpudirect-rdma/nccl-test.yaml and
nccl-test-managed-rdma.yaml; GKE "Allocate network resources by using GKE managed DRANET"."""

from typing import Any, Literal, NotRequired, TypedDict

from ..core.arg_types import enum_values
from ..core.validation import ArgsModel
from ..gpudirect.flavors import (
    GpuDirectFlavor,
    GpuDirectNetworking,
    counted_claim_template_spec,
    rdma_nic_count,
)

# The RDMA flavours and the GPUs of their machines (a3-ultragpu-8g, a4-highgpu-8g: 8; a4x-highgpu-4g,
# a4x-maxgpu-4g-metal: 4; ../shared/reference/gke-gpu-scale-out.md 1a).
NODE_GPUS = {
    GpuDirectFlavor.RDMA: 8,
    GpuDirectFlavor.RDMA_A4X: 4,
    GpuDirectFlavor.RDMA_A4X_MAX: 4,
}
RdmaFlavor = Literal["RDMA", "RDMA-A4X", "RDMA-A4X-Max"]
# A4X (GB200) and A4X Max (GB300): UCX's transports as llm-d's a4x and a4xmax overlays set them.
ARM_UCX_TLS = "rc_mlx5,rc,cuda_copy,cuda_ipc,sm,shm,self"


class GpuNicsArgs(TypedDict):
    """The GPU NICs of the pool the service runs on (its GPUDirect RDMA flavour)."""

    flavor: str
    """The pool's GPUDirect flavour: `RDMA` (A3 Ultra, A4), `RDMA-A4X` or `RDMA-A4X-Max`."""
    networking: NotRequired[str]
    """How Pods reach the NICs: `multiNetwork` (the `networking.gke.io/interfaces` annotation; the
    default) or `dranet` (a ResourceClaim of `mrdma.google.com` per Pod)."""


class GpuNicsSpec(ArgsModel):
    flavor: RdmaFlavor
    networking: enum_values(GpuDirectNetworking) = "multiNetwork"  # type: ignore[valid-type]


def node_gpus(nics: GpuNicsSpec) -> int:
    """The GPUs of a node of the flavour."""
    return NODE_GPUS[GpuDirectFlavor(nics.flavor)]


def pod_nics(nics: GpuNicsSpec, gpus_per_pod: int) -> int:
    """The NICs a Pod of `gpus_per_pod` GPUs gets: its share of the node's."""
    return rdma_nic_count(GpuDirectFlavor(nics.flavor)) * gpus_per_pod // node_gpus(nics)


def takes_whole_node(nics: GpuNicsSpec, gpus_per_pod: int) -> bool:
    return gpus_per_pod >= node_gpus(nics)


def nic_template_name(count: int) -> str:
    """The claim template of `count` NICs in the service's namespace (the teams' name for it)."""
    return f"rdma-{count}"


def nic_claim_template_spec(count: int) -> dict[str, Any]:
    return counted_claim_template_spec(count)


def nic_env(nics: GpuNicsSpec, *, kv_transfer: bool) -> dict[str, str]:
    """The server's environment on the NICs: NCCL's own IB transport with GKE's gIB plugin off and its
    bootstrap on eth0; with NIXL's KV transfer (`kv_transfer`), UCX's settings as llm-d's overlays set
    them per machine: every RoCE address taken as reachable on A3 Ultra, A4 and A4X Max (UCX v1.22.0
    src/uct/ib/base/ib_iface.c: `all`, "all addresses are assumed as reachable, without any check"),
    and on Arm (A4X, A4X Max) its transports named."""
    env = {
        "NCCL_NET_PLUGIN": "",
        "NCCL_TUNER_PLUGIN": "none",
        "NCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
    }
    if kv_transfer:
        if nics.flavor != "RDMA-A4X":
            env["UCX_IB_ROCE_REACHABILITY_MODE"] = "all"
        if nics.flavor != "RDMA":
            env["UCX_TLS"] = ARM_UCX_TLS
    return env
