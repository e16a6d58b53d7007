"""NcclAllReduce's args, the model that checks them, and the data the test is judged by: the image
that runs it per transport, and the bus-bandwidth floors per machine type and transport, each with
where its figure comes from.

Sources (facts taken, not code):

* cluster-toolkit@1047080375afbb44da4b596be314634e7486af4a (develop, 2026-06-25):
  examples/gke-a4/nccl-jobset-example.yaml (the JobSet flow: the gIB diagnostic image, sshd started
  by `/scripts/container_entry.sh daemon`, ssh and the hostfile on port 222 with `slots=8`, mpirun
  with `btl self,tcp`, `btl_tcp_if_include eth0`, `plm_rsh_no_tree_spawn`, `orte_keep_fqdn_hostnames`,
  nccl-tests in /third_party/nccl-tests/build, `-b 1K -e 8G -f 2 -g 1`, the GPU health check);
  examples/gke-consumption-options/dws-flex-start-queued-provisioning/nccl-jobset-example.yaml (the
  JobSet annotation `provreq.kueue.x-k8s.io/maxRunDurationSeconds`, the gke-queued toleration);
  examples/gke-a3-highgpu/multi-node-test-plan.md, examples/gke-a3-megagpu/README.md and
  examples/gke-consumption-options/dws-flex-start*/README.md (Google's example outputs).
* container-engine-accelerators@992db81257553607f1477945f1b3219632991829 (2026-06-11):
  gpudirect-rdma/nccl-test.yaml (the diagnostic image tag v1.1.1, LD_LIBRARY_PATH);
  gpudirect-tcpx/nccl-test-latest.yaml and gpudirect-tcpxo/nccl-test-latest.yaml (the test runs in
  the plugin image itself, sshd by `service ssh restart`); gpudirect-tcpx/nccl-config.yaml (TCPX:
  /third_party/nccl-tests-mpi/build, `taskset -c 0-7,104-111,52-59,156-163`).
* AI-Hypercomputer/gpu-recipes@d9e8da3054f67dbde980812f4d7ce146454e87d3:
  src/helm-charts/a3mega/nccl-tests/run_test.sh (TCPXO image: `service ssh restart` then ssh and
  hostfile on port 222, /third_party/nccl-tests-mpi/build, `taskset -c 32-63`).
* skypilot-org/skypilot@088eebc2dd2ef6cdac96f7b72e8f800bc9b1f9f2:
  examples/gcp_gpu_direct_tcpx/README.md (third-party measurements).
* ../shared/reference/gke-gpu-scale-out.md sections 4c, 5a, 5b.
"""

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, NamedTuple, NotRequired, TypedDict

from pydantic import Field

from ..core.arg_types import K8sName, LabelKey, LabelValue, enum_values, matching
from ..core.catalog import Accelerator, MachineType, load_catalog
from ..core.common import K8S_NAME, MAX_NODES_PER_POOL, Problems, cut, listing
from ..core.k8s import Toleration, TolerationSpec, check_toleration
from ..core.model import DNS_LABEL
from ..core.validation import ArgsModel
from ..dra.claims import RACK_ACCELERATORS, is_rack
from ..gpudirect.flavors import DRANET_FLAVORS, MACHINE_FLAVORS, GpuDirectFlavor, GpuDirectNetworking
from ..gpudirect.images import TCPX_PLUGIN, TCPXO_PLUGIN

# The JobSet is `nccl-<pool>`; a pool name has at most 40 characters (the pool rules'), so a Pod's
# hostname `nccl-<pool>-node-0-<i>` stays within a DNS label's 63.
MAX_POOL_NAME = 40
REPLICATED_JOB = "node"
DEFAULT_NAMESPACE = "gpu-nccl"
MAX_RUN_DURATION_ANNOTATION = "provreq.kueue.x-k8s.io/maxRunDurationSeconds"
# The floor is this fraction of the published figure: a judgement (the reference's "~80-85 %" bar),
# not a Google number; it leaves room for run-to-run noise and a shorter sweep.
FLOOR_FRACTION = 0.8
GIB = 1 << 30


class Transport(StrEnum):
    """How the nodes' GPUs reach each other in the test."""

    TCPX = "TCPX"
    TCPXO = "TCPXO"
    RDMA = "RDMA"
    TCP = "TCP"
    """NCCL's own sockets over the Pod network (eth0): no GPUDirect."""
    MNNVL = "MNNVL"
    """Multi-node NVLink inside a GB200/GB300 rack, through a ComputeDomain's IMEX channel (NCCL's
    sockets on eth0 only for what is not NVLink)."""


def transport_of(gpudirect: str | None) -> Transport:
    return Transport(gpudirect) if gpudirect else Transport.TCP


# -- What runs the test, per transport ---------------------------------------------------------------


class Runner(NamedTuple):
    """The image that runs sshd, mpirun and nccl-tests for one transport, and how."""

    image: str
    # nccl-tests built with MPI, in the image.
    tests_dir: str
    # Starts the image's sshd (port 222 in Google's images; the script finds 222 or 22).
    sshd: str
    # Prefix of each rank's command (Google's CPU pinning for the flavour), or "".
    launch_prefix: str
    # The largest message the sweep sends (bytes); the GPU's memory can lower it.
    max_bytes: int
    source: str


# The gIB diagnostic image: nccl-tests + Open MPI + sshd for NCCL over gIB (RDMA). On pools without
# GPUDirect it runs NCCL's socket transport (NCCL_NET=Socket); that it carries an NCCL core of its
# own for that case is UNVERIFIED (the RDMA installer stopped installing NCCL on the node in May
# 2026, container-engine-accelerators 2da1c92f, so the image must bring one for RDMA too).
GIB_DIAGNOSTIC = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.1.1"
_GIB_RUNNER = dict(
    image=GIB_DIAGNOSTIC,
    tests_dir="/third_party/nccl-tests/build",
    sshd="/scripts/container_entry.sh daemon &",
    launch_prefix="",
    source="cluster-toolkit@1047080 examples/gke-a4/nccl-jobset-example.yaml; "
    "container-engine-accelerators@992db812 gpudirect-rdma/nccl-test.yaml (tag v1.1.1)",
)
RUNNERS: dict[Transport, Runner] = {
    Transport.RDMA: Runner(**_GIB_RUNNER, max_bytes=8 * GIB),
    # 1 GiB: over one NIC a larger sweep takes too long, and the bus bandwidth levels off by then.
    Transport.TCP: Runner(**_GIB_RUNNER, max_bytes=1 * GIB),
    # TCPX/TCPXO: Google's tests run in the plugin installer's image (same tag, so the test's NCCL
    # and plugin match the node's). The TCPX image's ssh port (222) is inferred from the TCPXO
    # image's, UNVERIFIED; the script probes 222 then 22.
    Transport.TCPX: Runner(
        image=TCPX_PLUGIN,
        tests_dir="/third_party/nccl-tests-mpi/build",
        sshd="service ssh restart",
        launch_prefix="taskset -c 0-7,104-111,52-59,156-163",
        max_bytes=8 * GIB,
        source="container-engine-accelerators@992db812 gpudirect-tcpx/nccl-test-latest.yaml, "
        "gpudirect-tcpx/nccl-config.yaml",
    ),
    Transport.TCPXO: Runner(
        image=TCPXO_PLUGIN,
        tests_dir="/third_party/nccl-tests-mpi/build",
        sshd="service ssh restart",
        launch_prefix="taskset -c 32-63",
        max_bytes=8 * GIB,
        source="container-engine-accelerators@992db812 gpudirect-tcpxo/nccl-test-latest.yaml; "
        "AI-Hypercomputer/gpu-recipes@d9e8da30 src/helm-charts/a3mega/nccl-tests/run_test.sh",
    ),
}
# The rack's all-reduce (Arm hosts): the gIB diagnostic image's Arm build, as cluster-toolkit's A4X
# NCCL test runs it (examples/gke-a4x/nccl-jobset-example.yaml at 1047080: same sshd, hostfile and
# nccl-tests paths as the amd64 image's).
GIB_DIAGNOSTIC_ARM64 = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic-arm64:v1.0.6"
RUNNERS[Transport.MNNVL] = Runner(
    image=GIB_DIAGNOSTIC_ARM64,
    tests_dir="/third_party/nccl-tests/build",
    sshd="/scripts/container_entry.sh daemon &",
    launch_prefix="",
    max_bytes=8 * GIB,
    source="cluster-toolkit@1047080 examples/gke-a4x/nccl-jobset-example.yaml",
)
# Every other runner image is published for linux/amd64 only: Google publishes Arm builds under other
# names (e.g. nccl-plugin-gib-diagnostic-arm64, reference section 5a).
RUNNER_ARCH = "amd64"
RUNNER_ARCHES = {Transport.MNNVL: "arm64"}


def max_message_bytes(transport: Transport, gpu_memory_gb: int) -> int:
    """The sweep's largest message: the runner's, or less where the GPU is small (all_reduce_perf
    holds the send, receive and check buffers: a quarter of the GPU's memory, a power of two)."""
    fits = 1 << max(20, (gpu_memory_gb * GIB // 4).bit_length() - 1)
    return min(RUNNERS[transport].max_bytes, fits)


def size_text(size: int) -> str:
    """nccl-tests' size suffixes: 8589934592 -> 8G, 536870912 -> 512M."""
    return f"{size // GIB}G" if size % GIB == 0 else f"{size >> 20}M"


# -- Bus-bandwidth floors --------------------------------------------------------------------------


class BandwidthFloor(NamedTuple):
    """The out-of-place bus bandwidth the test must reach at its largest message, in GB/s."""

    gbps: float
    # measured: a published 2-node run; estimate: no run found, derived as `source` says;
    # override: the caller's min_bus_bandwidth_gbps.
    kind: str
    # The published figure the floor is FLOOR_FRACTION of (None for an override).
    figure_gbps: float | None
    source: str

    @property
    def note(self) -> str:
        figure = f" of {self.figure_gbps} GB/s" if self.figure_gbps is not None else ""
        share = f"{FLOOR_FRACTION:.0%}{figure}, " if self.figure_gbps is not None else ""
        return f"{self.kind}, {share}{self.source}"


def _floor(figure: float, kind: str, source: str) -> BandwidthFloor:
    return BandwidthFloor(round(figure * FLOOR_FRACTION, 1), kind, figure, source)


_A3_HIGH_TCPX = (
    "all_reduce 65.7-67.8 GB/s at 256 MiB-2 GiB on 2 a3-highgpu-8g GCE VMs (third party: "
    "skypilot-org/skypilot@088eebc2 examples/gcp_gpu_direct_tcpx/README.md); Google's GKE all_gather "
    "is 70.9 GB/s at 512 MiB (cluster-toolkit@1047080 examples/gke-a3-highgpu/multi-node-test-plan.md)"
)
_A3_ULTRA_RDMA = (
    "all_gather 325.5 GB/s at 8 GiB on GKE (third party reproducing Google's test Pods: "
    "skypilot-org/skypilot@088eebc2 examples/gcp_gpu_direct_tcpx/README.md); Google's flex-start "
    "example shows 328.9 (cluster-toolkit@1047080 examples/gke-consumption-options/dws-flex-start/README.md)"
)
FLOORS: dict[tuple[str, Transport], BandwidthFloor] = {
    ("a3-highgpu-8g", Transport.TCPX): _floor(65.7, "measured", _A3_HIGH_TCPX),
    ("a3-edgegpu-8g", Transport.TCPX): _floor(
        65.7, "estimate", "no published run; A3 High's TCPX figure (same GPUs, TCPX, NIC layout UNVERIFIED)"
    ),
    ("a3-megagpu-8g", Transport.TCPXO): _floor(
        188.7,
        "measured",
        "all_gather 188.7 GB/s at 8 GiB on GKE, Google's example output (cluster-toolkit@1047080 "
        "examples/gke-a3-megagpu/README.md); busbw is comparable across collectives (nccl-tests "
        "doc/PERFORMANCE.md)",
    ),
    ("a3-ultragpu-8g", Transport.RDMA): _floor(325.5, "measured", _A3_ULTRA_RDMA),
    ("a4-highgpu-8g", Transport.RDMA): _floor(
        325.5,
        "estimate",
        "no published A4 figure (cluster-toolkit's A4 benchmark READMEs show placeholders); A4 has A3 "
        "Ultra's 8 x 400 Gbps RDMA NICs, so A3 Ultra's measured 325.5 GB/s",
    ),
}
# Any machine type over plain TCP: no figure for a GKE pool (a third party's 19.4-20.9 GB/s on two
# a3-highgpu-8g GCE VMs without GPUDirect used an unknown number of NICs; a GKE Pod without GPUDirect
# has only eth0, so that figure is no floor here). A deliberately low bar that proves the
# nodes all-reduce correctly over the Pod network, not that the NIC is fast: 0.15 GB/s (1.2 Gbps) is
# under the smallest egress cap a GPU VM has (an n1-standard-1 with a T4: 2 Gbps, UNVERIFIED here).
PLAIN_TCP_ESTIMATE = BandwidthFloor(
    0.15,
    "estimate",
    None,
    "no published figure for this machine type over plain TCP; a conservative bar that proves a "
    "correct all-reduce over the Pod network, not the NIC's speed (set min_bus_bandwidth_gbps for more)",
)


# Multi-node NVLink inside a rack, by accelerator: NVLink, not the NICs, carries the all-reduce.
_GB200_MNNVL = (
    "811 GB/s busbw on 2 GB200 nodes (8 GPUs) over MNNVL, third party "
    "(https://www.lixueduan.com/posts/ai/13-gb200-mnnvl-nccl-test; which collective it ran is "
    "UNVERIFIED); no Google figure for A4X found"
)
MNNVL_FLOORS: dict[str, BandwidthFloor] = {
    "nvidia-gb200": _floor(811, "measured", _GB200_MNNVL),
    "nvidia-gb300": _floor(
        811,
        "estimate",
        "no published GB300 run; GB200's third-party 811 GB/s (both NVLink 5, 1.8 TB/s a GPU per NVIDIA's "
        "NVL72 pages, UNVERIFIED here)",
    ),
}


def floor_for(
    machine_type: str, transport: Transport, override: float | None = None, accelerator: str | None = None
) -> BandwidthFloor:
    """The floor a run on `machine_type` over `transport` is judged by."""
    if override is not None:
        return BandwidthFloor(override, "override", None, "min_bus_bandwidth_gbps")
    if transport is Transport.MNNVL and accelerator in MNNVL_FLOORS:
        return MNNVL_FLOORS[accelerator]
    if (machine_type, transport) in FLOORS:
        return FLOORS[(machine_type, transport)]
    if transport is Transport.TCP:
        return PLAIN_TCP_ESTIMATE
    raise KeyError(f"no bandwidth floor for {machine_type} over {transport}")


# -- Args ------------------------------------------------------------------------------------------


class NcclAllReduceArgs(TypedDict):
    """A multi-node all-reduce on one GPU pool, queued by Kueue."""

    pool: str
    """The GPU pool's name (at most 40 characters): the JobSet, its LocalQueue and its
    NetworkPolicy are `nccl-<pool>`."""
    node_selector: dict[str, str]
    """Node labels that put a Pod on the pool, e.g. cloud.google.com/gke-nodepool."""
    tolerations: NotRequired[list[Toleration]]
    """Tolerations for the pool's taints (the GPU taint among them). Defaults to none."""
    machine_type: str
    """The pool's machine type, e.g. a3-megagpu-8g: picks the floor and the Pods' CPU and memory."""
    accelerator: str
    """The pool's GKE accelerator, e.g. nvidia-h100-mega-80gb (its host architecture must be amd64:
    the test images are published for amd64 only)."""
    gpus_per_node: int
    """GPUs per node: each Pod takes all of them (one MPI rank per GPU)."""
    nodes: NotRequired[int]
    """Nodes (Pods) the all-reduce spans, at least 2. Defaults to 2."""
    max_nodes: NotRequired[int]
    """The pool's most nodes: `nodes` must not exceed it. Defaults to unchecked."""
    gpudirect: NotRequired[GpuDirectFlavor]
    """The pool's GPUDirect flavour (it must be the machine type's). Defaults to none: NCCL over TCP
    sockets on the Pod network."""
    gpudirect_networking: NotRequired[str]
    """With gpudirect: 'multiNetwork' (the Networks' Pod annotations) or 'dranet' (the pool is on GKE's
    DRANET: the Pods claim the node's RDMA NICs through the ResourceClaimTemplate `rdma-<n>` (ExactCount
    n, the flavour's NIC count, which Kueue 0.19.2 can count where `default-rdma`'s All it refuses),
    declared in its namespace). Defaults to 'multiNetwork'."""
    cluster_queue: str
    """The Kueue ClusterQueue of the pool; the component makes a LocalQueue pointing at it."""
    namespace: NotRequired[str]
    """The namespace the component creates for the test (one per NcclAllReduce). Defaults to
    gpu-nccl."""
    min_bus_bandwidth_gbps: NotRequired[float]
    """The floor, in GB/s, instead of the machine type's published figure. Defaults to the table's."""
    queued: NotRequired[bool]
    """The pool takes nodes only through queued provisioning: the Pods tolerate
    cloud.google.com/gke-queued and the JobSet asks for its nodes for the test's deadline. Defaults
    to false."""
    topology: NotRequired[bool]
    """The pool's queue places Pods by topology: the Pods ask Kueue to share the closest topology
    level the free nodes allow (`kueue.x-k8s.io/podset-preferred-topology: kubernetes.io/hostname`).
    Defaults to false."""
    compute_domain: NotRequired[bool]
    """The pool is a GB200/GB300 NVL72 rack: the test declares a ComputeDomain and each Pod claims its
    IMEX channel, so NCCL reaches the other VMs' GPUs over NVLink. Needs NVIDIA's DRA driver with
    ComputeDomains in the cluster (NvidiaDraDriver, compute_domains). Required on those
    accelerators, refused on others. Defaults to false."""
    dra_gpus: NotRequired[bool]
    """The pool's GPUs are handed out by NVIDIA's DRA driver, not GKE's device plugin: each Pod claims
    every GPU of its node through the ResourceClaimTemplate `gpu-<n>` (DeviceClass gpu.nvidia.com),
    which the component declares in its namespace, and asks for no `nvidia.com/gpu`. Needs the driver
    with GPU allocation in the cluster (NvidiaDraDriver, gpus), and Kueue's Configuration mapping
    DeviceClass gpu.nvidia.com in `resources.deviceClassMappings` (unmapped, Kueue 0.19 leaves the
    Workload inadmissible; not written by this component). Defaults to false."""


class NcclAllReduceSpec(ArgsModel):
    pool: matching(  # type: ignore[valid-type]
        K8S_NAME, "lowercase letters, digits and hyphens, starting with a letter", max_length=MAX_POOL_NAME
    )
    node_selector: Annotated[dict[LabelKey, LabelValue], Field(max_length=64)]
    tolerations: Annotated[list[TolerationSpec], Field(default_factory=list, max_length=32)]
    machine_type: Annotated[str, Field(min_length=1, max_length=64)]
    accelerator: Annotated[str, Field(min_length=1, max_length=100)]
    gpus_per_node: int = Field(ge=1, le=16)
    nodes: int = Field(2, ge=2, le=MAX_NODES_PER_POOL)
    max_nodes: int | None = Field(None, ge=1, le=MAX_NODES_PER_POOL)
    gpudirect: enum_values(GpuDirectFlavor) | None = None  # type: ignore[valid-type]
    gpudirect_networking: enum_values(GpuDirectNetworking) | None = None  # type: ignore[valid-type]
    cluster_queue: K8sName
    namespace: Annotated[str, Field(max_length=63, pattern=DNS_LABEL)] = DEFAULT_NAMESPACE
    min_bus_bandwidth_gbps: float | None = Field(None, gt=0, le=10_000)
    queued: bool = False
    topology: bool = False
    compute_domain: bool = False
    dra_gpus: bool = False

    @property
    def transport(self) -> Transport:
        return Transport.MNNVL if self.compute_domain else transport_of(self.gpudirect)

    @property
    def dranet(self) -> bool:
        """The Pods claim their RDMA NICs through GKE's DRANET."""
        return self.gpudirect is not None and self.gpudirect_networking == GpuDirectNetworking.DRANET


def machine_of(spec: NcclAllReduceSpec) -> tuple[Accelerator, MachineType]:
    """The checked args' accelerator and machine type (the rules made sure both exist)."""
    accelerator = load_catalog().accelerator(spec.accelerator)
    machine = accelerator.machine_type(spec.machine_type) if accelerator else None
    assert accelerator is not None and machine is not None, "checked by nccl_rules"
    return accelerator, machine


def nccl_rules(spec: NcclAllReduceSpec) -> list[str]:
    """What the cluster would refuse, or what could never pass: each problem under its arg."""
    problems = Problems()
    if spec.max_nodes is not None and spec.nodes > spec.max_nodes:
        problems.add(
            "nodes",
            f"{spec.nodes} is more than max_nodes {spec.max_nodes}: the pool cannot hold that many nodes",
        )
    catalog = load_catalog()
    accelerator = catalog.accelerator(spec.accelerator)
    if accelerator is None:
        problems.add(
            "accelerator",
            f"{cut(spec.accelerator)} is not a GPU of the catalog; allowed: "
            + listing(sorted(catalog.accelerators)),
        )
    else:
        if is_rack(accelerator.name) and not spec.compute_domain:
            problems.add(
                "compute_domain",
                f"required on {accelerator.name}: its VMs reach each other's GPUs over NVLink only "
                "through a ComputeDomain (NVIDIA's DRA driver: NvidiaDraDriver with compute_domains)",
            )
        elif spec.compute_domain and not is_rack(accelerator.name):
            problems.add(
                "compute_domain",
                f"not allowed on {accelerator.name}: ComputeDomains join the VMs of an NVL72 rack; "
                f"rack accelerators: {listing(sorted(RACK_ACCELERATORS))}",
            )
        elif spec.compute_domain and spec.gpudirect is not None:
            problems.add("compute_domain", "not allowed with gpudirect: the test runs over NVLink alone")
        elif accelerator.arch != RUNNER_ARCHES.get(spec.transport, RUNNER_ARCH):
            problems.add(
                "accelerator",
                f"{accelerator.name} has {accelerator.arch} hosts, and the NCCL test images for "
                f"{spec.transport} are published for {RUNNER_ARCHES.get(spec.transport, RUNNER_ARCH)} only",
            )
        machine = accelerator.machine_type(spec.machine_type)
        if machine is None:
            problems.add(
                "machine_type",
                f"{cut(spec.machine_type)} cannot carry {accelerator.name}; allowed: "
                + listing(accelerator.machine_type_examples()),
            )
        elif spec.gpus_per_node not in accelerator.counts_for(machine):
            problems.add(
                "gpus_per_node",
                f"{spec.gpus_per_node} is not a GPU count of {machine.name}; allowed: "
                + listing(str(c) for c in accelerator.counts_for(machine)),
            )
    if spec.gpudirect is not None:
        own = MACHINE_FLAVORS.get(spec.machine_type)
        if own is None:
            problems.add(
                "gpudirect",
                f"{spec.gpudirect} is not allowed: {cut(spec.machine_type)} has no GPUDirect NICs; "
                f"machine types with GPUDirect: {listing(sorted(MACHINE_FLAVORS))}",
            )
        elif own != spec.gpudirect:
            problems.add(
                "gpudirect",
                f"{spec.gpudirect} does not match machine type {spec.machine_type}, whose flavour is {own}",
            )
    if spec.gpudirect_networking is not None and spec.gpudirect is None:
        problems.add("gpudirect_networking", f"{spec.gpudirect_networking} is only allowed with gpudirect")
    elif spec.dranet and spec.gpudirect not in DRANET_FLAVORS:
        problems.add(
            "gpudirect_networking",
            f"'dranet' is not allowed with gpudirect {spec.gpudirect}: DRANET claims RDMA NICs; allowed "
            "with: " + listing(sorted(DRANET_FLAVORS)),
        )
    for j, toleration in enumerate(spec.tolerations):
        check_toleration(f"tolerations[{j}]", toleration, problems)
    return problems.items


# -- What follows from checked args ----------------------------------------------------------------


def jobset_name(pool: str) -> str:
    return f"nccl-{pool}"


def nccl_commands(name: str, namespace: str, container: str) -> dict[str, str]:
    """kubectl commands: wait for the JobSet, read rank 0's log and its result line, list the Pods,
    and see the Kueue workload (why it waits)."""
    rank0 = f"jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=0"
    logs = f"kubectl logs -n {namespace} -l {rank0} -c {container} --tail=-1"
    return {
        "wait": f"kubectl wait -n {namespace} --for=condition=Completed jobset/{name} --timeout=4h",
        "logs": logs,
        "result": f"{logs} | grep 'NCCL-ALLREDUCE RESULT'",
        "pods": f"kubectl get pods -n {namespace} -l jobset.sigs.k8s.io/jobset-name={name} -o wide",
        "queue": f"kubectl get workloads.kueue.x-k8s.io -n {namespace}",
    }


def settings_env(items: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in items.items()]
