"""The GPUDirect pieces of a workload Pod, per flavour: the one place workloads get them.

Plain Kubernetes manifest pieces (camelCase keys, JSON-serialisable), for the sample JobSet and, as a
stack output, for users' own JobSets. The node side is GpuDirectSoftware (gpudirect/software.py).

Sources (container-engine-accelerators@992db81257553607f1477945f1b3219632991829, 2026-06-11):
gpudirect-tcpx/nccl-test-latest.yaml and nccl-config.yaml (TCPX: annotations, the tcpx-daemon and its
command, mounts, IPC_LOCK, the NCCL env), gpudirect-tcpxo/nccl-test-latest.yaml, README.md and
best-practice.md (TCPXO: the tcpxo-daemon as a native sidecar with its startup probe, aperture
devices, NCCL_LIB_DIR and nccl-env-profile.sh), gpudirect-rdma/nccl-test.yaml (RDMA: gib mounts,
250Gi /dev/shm, set_nccl_env.sh), nri_device_injector/README.md (the devices annotation);
cluster-toolkit modules/compute/gke-node-pool/gpu-direct-workload/scripts/enable-tcpx-in-workload.py
(the TCPX socket directory as a Pod-local emptyDir rather than a host path). Reference:
../shared/reference/gke-gpu-scale-out.md sections 2b-2d.
"""

import copy
import json
import re
from typing import Any

from ..core.image_digests import pinned
from .flavors import FLAVORS, GpuDirectFlavor, pod_interfaces
from .images import (
    APERTURE_DEVICES,
    GIB_HOST_DIR,
    NVIDIA_HOST_DIR,
    NVIDIA_LIB64_HOST,
    TCPX_RXDM,
    TCPXO_RXDM,
    published_digests,
)

NVIDIA_LIB64 = "/usr/local/nvidia/lib64"
GIB_DIR = "/usr/local/gib"
SHM_VOLUME = "nccl-shm"
# /dev/shm sizes Google's test Pods use (TCPXO 1Gi, RDMA 250Gi; TCPX's has none, it gets TCPXO's).
# A memory-backed emptyDir: what NCCL writes there counts against the Pod's memory.
SHM_SIZE = {
    GpuDirectFlavor.TCPX: "1Gi",
    GpuDirectFlavor.TCPXO: "1Gi",
    GpuDirectFlavor.RDMA: "250Gi",
    GpuDirectFlavor.RDMA_A4X: "250Gi",
    GpuDirectFlavor.RDMA_A4X_MAX: "250Gi",
}
PLAIN_TCP_SHM_SIZE = "1Gi"
RXDM_CONTAINER = {GpuDirectFlavor.TCPX: "tcpx-daemon", GpuDirectFlavor.TCPXO: "tcpxo-daemon"}
# The RxDM's GPU devices, injected by the NRI device injector (it needs no nvidia.com/gpu request).
_GPU_DEVICES = [*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm"]
RXDM_DEVICES = {
    GpuDirectFlavor.TCPX: _GPU_DEVICES,
    GpuDirectFlavor.TCPXO: [*_GPU_DEVICES, "/dev/dmabuf_import_helper"],
}
# TCPXO: the daemon writes this file once its initialisation is done (~30 s); no '_' in the name.
HEALTH_CHECK_FILE = "/run/health-check"
# The TCPX NCCL settings of Google's nccl-config.yaml (A3 High: the CPU bindings are its NUMA layout).
_TCPX_NCCL = {
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
    "NCCL_CROSS_NIC": "0",
    "NCCL_ALGO": "Ring,Tree",
    "NCCL_PROTO": "Simple",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_P2P_PXN_LEVEL": "0",
    "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
    "NCCL_P2P_NET_CHUNKSIZE": "524288",
    "NCCL_P2P_PCI_CHUNKSIZE": "524288",
    "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
    "NCCL_BUFFSIZE": "4194304",
    "NCCL_NSOCKS_PERTHREAD": "4",
    "NCCL_SOCKET_NTHREADS": "1",
    "NCCL_GPUDIRECTTCPX_TX_BINDINGS": (
        "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
    ),
    "NCCL_GPUDIRECTTCPX_RX_BINDINGS": (
        "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
    ),
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
}
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _host(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path}}


def _mount(name: str, path: str, *, read_only: bool = False) -> dict[str, Any]:
    return {"name": name, "mountPath": path, **({"readOnly": True} if read_only else {})}


def _env(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _shm(size: str) -> dict[str, Any]:
    return {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}}


# What the workload container itself needs: never privileged; TCPX adds IPC_LOCK, as Google's does.
_WORKLOAD_SECURITY = {"privileged": False, "allowPrivilegeEscalation": False}


def _rxdm(flavor: GpuDirectFlavor) -> dict[str, Any]:
    """The RxDM daemon as a native sidecar: an init container with restartPolicy Always starts before
    the workload, keeps running beside it, and is stopped once the workload's containers exit, so a
    Job completes (best-practice.md; Kubernetes 1.29+). Not privileged: the NRI device injector
    hands it the GPUs (the devices annotation); it needs NET_ADMIN (TCPXO: and NET_BIND_SERVICE)
    and the host's /sys and /proc/sys, as in Google's manifests."""
    common_mounts = [
        _mount("nccl-libraries", NVIDIA_LIB64, read_only=True),
        _mount("nccl-host-sys", "/hostsysfs"),
        _mount("nccl-host-proc-sys", "/hostprocsysfs"),
    ]
    container: dict[str, Any] = {"name": RXDM_CONTAINER[flavor], "restartPolicy": "Always"}
    if flavor is GpuDirectFlavor.TCPX:
        container.update(
            image=TCPX_RXDM,
            command=[
                "/tcpgpudmarxd/build/app/tcpgpudmarxd",
                "--gpu_nic_preset",
                "a3vm",
                "--gpu_shmem_type",
                "fd",
                "--uds_path",
                "/run/tcpx",
                "--setup_param",
                # Google's YAML writes this as a plain scalar, `\"--verbose 128 2 0 \"`: the
                # backslashes and quotes are part of the argument.
                '\\"--verbose 128 2 0 \\"',
            ],
            env=_env({"LD_LIBRARY_PATH": NVIDIA_LIB64}),
            securityContext={
                "privileged": False,
                "allowPrivilegeEscalation": False,
                "capabilities": {"add": ["NET_ADMIN"]},
            },
            volumeMounts=[*common_mounts, _mount("nccl-tcpx-socket", "/run/tcpx")],
        )
        # No startup probe: the health-check file is documented for the TCPXO daemon only.
    else:
        container.update(
            # By the digest NVIDIA's manifest publishes for the tag (images.py PUBLISHED_DIGESTS).
            image=pinned(TCPXO_RXDM, published_digests()),
            command=["/bin/sh", "-c"],
            args=[
                "set -ex\n"
                "chmod 755 /fts/entrypoint_rxdm_container.sh\n"
                "/fts/entrypoint_rxdm_container.sh --num_hops=2\n"
            ],
            env=_env({"LD_LIBRARY_PATH": NVIDIA_LIB64, "HEALTH_CHECK_LOG_FILE": HEALTH_CHECK_FILE}),
            securityContext={
                "privileged": False,
                "allowPrivilegeEscalation": False,
                "capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]},
            },
            volumeMounts=common_mounts,
            # best-practice.md's probe; 12 failures (about 60 s) rather than its 6, since the
            # initialisation itself typically takes about 30 s. A daemon on a bad node never writes
            # the file, so the Pod never starts its workload.
            startupProbe={
                "exec": {"command": ["cat", HEALTH_CHECK_FILE]},
                "initialDelaySeconds": 1,
                "periodSeconds": 5,
                "timeoutSeconds": 1,
                "successThreshold": 1,
                "failureThreshold": 12,
            },
        )
    # A request only: a CPU limit would throttle the data path. Sizes are ours (UNVERIFIED).
    # allowPrivilegeEscalation false (no_new_privs): the daemon runs as root with its added
    # capabilities from the start, which no_new_privs keeps (it only stops setuid and file
    # capabilities from raising privileges at a later exec; Kubernetes forces it true only for
    # privileged or CAP_SYS_ADMIN containers, neither of which this is). Left as Google's manifests
    # have it (container-engine-accelerators gpudirect-tcpx(o)/nccl-test-latest.yaml): no
    # seccompProfile and no memory limit. Whether the closed-source daemon makes a syscall that
    # RuntimeDefault refuses (bpf, perf_event_open) or outgrows a limit is UNVERIFIED (no A3 node to
    # try it on), and a sidecar that fails stops every GPUDirect job. What confines it besides: the
    # admission policy pins this container as rendered here (gpudirect/admission_cel.py).
    container["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    return container


def gpudirect_pod_parts(
    flavor: GpuDirectFlavor, *, container: str = "main", shm_size: str | None = None
) -> dict[str, Any]:
    """Plain Kubernetes manifest pieces (camelCase keys, as in YAML), JSON-serialisable, fresh on
    every call:

    - ``annotations``: Pod-template annotations: ``networking.gke.io/default-interface`` eth0 and
      ``networking.gke.io/interfaces`` (JSON of ``gpudirect.pod_interfaces(flavor)``); TCPX/TCPXO
      also ``devices.gke.io/container.<rxdm>`` (the GPUs for the RxDM sidecar, via the NRI injector).
    - ``initContainers``: TCPX/TCPXO: the RxDM daemon as a native sidecar; RDMA: none.
    - ``volumes``: what the sidecar and the workload mount (the NCCL libraries from the host, the
      TCPX socket directory, the host's /sys and /proc/sys for the sidecar, TCPXO's aperture
      devices, RDMA's gib directory) and a memory-backed /dev/shm of ``shm_size`` (default per
      flavour: ``SHM_SIZE``).
    - ``volumeMounts``, ``env``, ``securityContext``: for the workload container ``container``
      (``env`` sets LD_LIBRARY_PATH to the NCCL libraries the installer put on the node: an image
      that needs its own paths there must append them).
    - ``ncclSetup``: shell line the workload runs (in bash) before NCCL starts: TCPXO sources
      ``${NCCL_LIB_DIR}/nccl-env-profile.sh``, RDMA ``/usr/local/gib/scripts/set_nccl_env.sh``;
      TCPX '' (its settings are all in ``env``).

    The workload container requests the node's GPUs (``nvidia.com/gpu``) itself."""
    flavor = GpuDirectFlavor(flavor)
    if not _DNS_LABEL.fullmatch(container) or len(container) > 63:
        raise ValueError(f"container: {container!r} is not a Kubernetes container name")
    if container == RXDM_CONTAINER.get(flavor):
        raise ValueError(f"container: {container!r} is the {flavor} sidecar's name")
    annotations = {
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": json.dumps(pod_interfaces(flavor)),
    }
    shm = _shm(shm_size or SHM_SIZE[flavor])
    env = {"LD_LIBRARY_PATH": NVIDIA_LIB64}
    security: dict[str, Any] = dict(_WORKLOAD_SECURITY)
    init_containers: list[dict[str, Any]] = []
    nccl_setup = ""
    if flavor is GpuDirectFlavor.RDMA_A4X_MAX:
        # cluster-toolkit examples/gke-a4x-max-bm/nccl-jobset-example.yaml: gIB in the workload's own
        # image (Google's nccl-gib-a4x-max-arm64), the driver from the host, IPC_LOCK, 250Gi /dev/shm.
        volumes = [_host("nccl-nvidia", NVIDIA_HOST_DIR), shm]
        mounts = [_mount("nccl-nvidia", "/usr/local/nvidia", read_only=True)]
        env["LD_LIBRARY_PATH"] = f"{NVIDIA_LIB64}:{GIB_DIR}/lib64"
        security["capabilities"] = {"add": ["IPC_LOCK"]}
    elif flavor in (GpuDirectFlavor.RDMA, GpuDirectFlavor.RDMA_A4X):  # gIB, x86 or Arm
        volumes = [_host("nccl-nvidia", NVIDIA_HOST_DIR), _host("nccl-gib", GIB_HOST_DIR), shm]
        mounts = [
            _mount("nccl-nvidia", "/usr/local/nvidia", read_only=True),
            _mount("nccl-gib", GIB_DIR, read_only=True),
        ]
        env["NCCL_NET"] = "gIB"
        nccl_setup = f"source {GIB_DIR}/scripts/set_nccl_env.sh"
    else:
        rxdm = RXDM_CONTAINER[flavor]
        annotations[f"devices.gke.io/container.{rxdm}"] = "".join(
            f"- path: {device}\n" for device in RXDM_DEVICES[flavor]
        )
        init_containers.append(_rxdm(flavor))
        volumes = [
            _host("nccl-libraries", NVIDIA_LIB64_HOST),
            _host("nccl-host-sys", "/sys"),
            _host("nccl-host-proc-sys", "/proc/sys"),
            shm,
        ]
        mounts = [_mount("nccl-libraries", NVIDIA_LIB64, read_only=True)]
        if flavor is GpuDirectFlavor.TCPX:
            # The daemon's Unix sockets, shared within the Pod only; the plugin looks in /tmp.
            volumes.append({"name": "nccl-tcpx-socket", "emptyDir": {}})
            mounts.append(_mount("nccl-tcpx-socket", "/tmp"))
            nics = ",".join(nic.interface for nic in FLAVORS[flavor].nics)
            env.update(_TCPX_NCCL, NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=nics)
            # IPC_LOCK: pinning memory for the GPU data path, as in Google's test Pods.
            security["capabilities"] = {"add": ["IPC_LOCK"]}
        else:
            # The aperture devices are read-write: the LLCM path maps their PCI resources.
            volumes.append(_host("nccl-aperture-devices", APERTURE_DEVICES))
            mounts.append(_mount("nccl-aperture-devices", APERTURE_DEVICES))
            env.update(NCCL_LIB_DIR=NVIDIA_LIB64, NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=APERTURE_DEVICES)
            nccl_setup = "source ${NCCL_LIB_DIR}/nccl-env-profile.sh"
    mounts.append(_mount(SHM_VOLUME, "/dev/shm"))
    return copy.deepcopy(
        {
            "annotations": annotations,
            "initContainers": init_containers,
            "volumes": volumes,
            "volumeMounts": mounts,
            "env": _env(env),
            "ncclSetup": nccl_setup,
            "securityContext": security,
        }
    )


def plain_tcp_pod_parts(*, shm_size: str = PLAIN_TCP_SHM_SIZE) -> dict[str, Any]:
    """The same keys for a pool without GPUDirect: NCCL over TCP sockets on the Pod network (eth0),
    no annotations, no sidecar; a memory-backed /dev/shm for NCCL's intra-node transport."""
    return {
        "annotations": {},
        "initContainers": [],
        "volumes": [_shm(shm_size)],
        "volumeMounts": [_mount(SHM_VOLUME, "/dev/shm")],
        "env": _env({"NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "eth0"}),
        "ncclSetup": "",
        "securityContext": dict(_WORKLOAD_SECURITY),
    }
