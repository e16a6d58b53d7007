"""The in-cluster objects one GPUDirect flavour needs: its Networks and its node software.

Sources: ../shared/reference/gke-gpu-scale-out.md sections 2a-2c, and Google's own manifests in
GoogleCloudPlatform/container-engine-accelerators at commit
992db81257553607f1477945f1b3219632991829 (2026-06-11, "bump tcpxo-daemon version to 1.0.21 and
remove deprecated flags"), written here as our own objects (the images, host paths and commands are
the facts taken from them):

* gpudirect-tcpx/nccl-tcpx-installer.yaml (last changed 22f1e653, 2024-06-12)
* gpudirect-tcpxo/nccl-tcpxo-installer.yaml (685dca25, 2026-01-09)
* gpudirect-rdma/nccl-rdma-installer.yaml (2da1c92f, 2026-05-06)
* gpudirect-rdma/nccl-rdma-installer-a4x.yaml (2da1c92f, 2026-05-06; A4X's Arm hosts)
* nri_device_injector/nri-device-injector.yaml (3491157a, 2026-05-29)
* gpudirect-tcpx/nccl-test-latest.yaml, gpudirect-tcpxo/nccl-test-latest.yaml and
  gpudirect-tcpxo/README.md (the RxDM images, used by pod_parts.py); the images and host paths
  themselves are in images.py
"""

import ipaddress
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import K8sName, NodeNetworks, enum_values
from ..core.common import Problem, Problems, cut
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.image_digests import ImageDigests, check_digests, pinned
from ..core.k8s import (
    Toleration,
    TolerationSpec,
    app_labels,
    check_toleration,
    image_version,
    selector_labels,
)
from ..core.model import Cidr
from ..core.nodes import NodeNetwork, node_network_at
from ..core.validation import ArgsModel
from .asapd import asapd_lite_daemon_set
from .flavors import (
    DEFAULT_GPUDIRECT_CIDR,
    FLAVORS,
    MAX_GPUDIRECT_PREFIX,
    GpuDirectFlavor,
    subnet_range,
)
from .images import (
    APERTURE_DEVICES,
    GIB_HOST_DIR,
    GIB_PLUGIN,
    GIB_PLUGIN_ARM64,
    NODE_IMAGES_BY_TAG,
    NRI_DEVICE_INJECTOR,
    NVIDIA_LIB64_HOST,
    PAUSE,
    TCPX_PLUGIN,
    TCPXO_PLUGIN,
    TCPXO_PRE_INSTALL,
    published_digests,
)
from .node_parts import device_network, node_affinity, resources

NAMESPACE = "kube-system"
# Every taint, as Google's manifests tolerate it (each of the four names `tolerations: - operator:
# "Exists"`): node software that skips a node because GKE added a taint the list did not name (a new
# capacity option, a repair or upgrade taint) leaves that node without its NCCL plugin, and the job
# scheduled there fails. The node affinity, not the tolerations, decides which nodes they run on.
# tests/test_gpudirect_upstream.py compares this, the images and the host paths with the vendored
# manifests.
NODE_TOLERATIONS: tuple[dict[str, str], ...] = ({"operator": "Exists"},)


class _HostDir(NamedTuple):
    name: str
    host_path: str
    mount_path: str
    type: str | None = None


class _Installer(NamedTuple):
    """One flavour's NCCL plugin installer DaemonSet (and whether the flavour needs the NRI device
    injector, which hands the RxDM sidecar the GPU devices without making it privileged)."""

    name: str
    image: str
    dirs: tuple[_HostDir, ...]
    script: str
    nri_injector: bool
    # The host step, given the GPU NIC subnets it accepts TCP from.
    pre_install: Callable[[list[str]], str] | None = None
    # The DaemonSet's name where it differs from the installer container's (`name`).
    daemon_set: str | None = None


# TCPX/TCPXO installers: install the plugin and NCCL under the host's /var/lib, then copy them into
# GKE's driver lib64 (the host's /home/kubernetes/bin is mounted at /usr/local). As Google's scripts
# (TCPXO's makes its entry script executable first).
def _tcpx_script(directory: str, *, chmod: bool) -> str:
    chmod_line = "chmod 755 /scripts/container_entry.sh\n" if chmod else ""
    return f"""set -ex
{chmod_line}/scripts/container_entry.sh install --install-nccl
mkdir -p /usr/local/nvidia/lib64
cp -r /var/lib/{directory}/lib64/. /usr/local/nvidia/lib64
echo "installation finishes"
"""


# TCPXO, run on the host (nsenter into PID 1's namespaces). What it must do is Google's (the
# installer manifest): accept inbound TCP on the host firewall (COS drops it by default), load the
# dmabuf import-helper module, and bind-mount each "aperture" PCI device (vendor:device 1ae0:0084)
# under /dev/aperture_devices, readable by workloads. Written here to be safe to re-run when the Pod
# restarts: each firewall rule is added once, a device already mounted is left as it is.
# The firewall: Google's rule accepts TCP on every interface (`-I INPUT -p tcp -m tcp -j ACCEPT`);
# here it accepts TCP only from the flavour's GPU NIC subnets (`-s`, one rule each), where the peers'
# FasTrak traffic comes from (each peer NIC sends from its address in the same NIC's subnet), and a
# rule on every interface that an earlier version (or Google's installer) added is deleted. The
# primary NIC (eth0: the Pod network, NCCL_SOCKET_IFNAME and NCCL_FASTRAK_CTRL_DEV) keeps COS's
# firewall and GKE's own rules. Source, not interface: the NIC names on the host are UNVERIFIED
# (inside the Pod they are eth1..eth8, `networking.gke.io/interfaces`), the ranges are this program's.
def tcpxo_host_setup(source_ranges: list[str]) -> str:
    """The TCPXO installer's host step, accepting inbound TCP from `source_ranges` only."""
    accept = "".join(
        f"/sbin/iptables -C INPUT -s {cidr} -p tcp -m tcp -j ACCEPT 2>/dev/null || "
        f"/sbin/iptables -I INPUT -s {cidr} -p tcp -m tcp -j ACCEPT\n"
        for cidr in source_ranges
    )
    return f"""set -e
while /sbin/iptables -D INPUT -p tcp -m tcp -j ACCEPT 2>/dev/null; do :; done
{accept}modprobe import-helper
mkdir -p {APERTURE_DEVICES}
for bdf in $(lspci -D -n -d 1ae0:0084 | cut -d' ' -f1); do
  target="{APERTURE_DEVICES}/$bdf"
  mkdir -p "$target"
  if ! mountpoint -q "$target"; then
    mount --bind "$(readlink -f "/sys/bus/pci/devices/$bdf")" "$target"
  fi
  chmod -R a+r "$target"
  chmod a+rw "$target"/resource*
done
"""


# RDMA (gIB): copy into the host's driver lib64 and gib directories. Without --install-nccl: Google
# dropped it from its RDMA installers in May 2026.
_GIB_SCRIPT = f"""set -ex
/scripts/container_entry.sh install
cp -r /var/lib/gib/lib64/. /usr/local{NVIDIA_LIB64_HOST}
cp -r /var/lib/gib/. /usr/local{GIB_HOST_DIR}
echo "installation finishes"
"""
_TCPX_DIRS = (
    _HostDir("var-lib", "/var/lib", "/var/lib"),
    _HostDir("library-dir-host", "/home/kubernetes/bin", "/usr/local"),
)
_GIB_DIRS = (
    _HostDir("library-dir-host", NVIDIA_LIB64_HOST, f"/usr/local{NVIDIA_LIB64_HOST}", "DirectoryOrCreate"),
    _HostDir("gib", GIB_HOST_DIR, f"/usr/local{GIB_HOST_DIR}"),
)
INSTALLERS: dict[GpuDirectFlavor, _Installer] = {
    GpuDirectFlavor.TCPX: _Installer(
        "nccl-tcpx-installer", TCPX_PLUGIN, _TCPX_DIRS, _tcpx_script("tcpx", chmod=False), nri_injector=True
    ),
    GpuDirectFlavor.TCPXO: _Installer(
        "nccl-tcpxo-installer",
        TCPXO_PLUGIN,
        _TCPX_DIRS,
        _tcpx_script("tcpxo", chmod=True),
        nri_injector=True,
        pre_install=tcpxo_host_setup,
    ),
    GpuDirectFlavor.RDMA: _Installer(
        "nccl-rdma-installer", GIB_PLUGIN, _GIB_DIRS, _GIB_SCRIPT, nri_injector=False
    ),
    # Google names this DaemonSet nccl-rdma-installer too; renamed so that both run in one kube-system.
    GpuDirectFlavor.RDMA_A4X: _Installer(
        "nccl-rdma-installer",
        GIB_PLUGIN_ARM64,
        _GIB_DIRS,
        _GIB_SCRIPT,
        nri_injector=False,
        daemon_set="nccl-rdma-a4x-installer",
    ),
}


class GpuDirectSoftwareArgs(TypedDict):
    """One GPUDirect flavour present in the cluster, and where its extra NICs are."""

    flavor: GpuDirectFlavor
    """The flavour: TCPX (A3 High), TCPXO (A3 Mega) or RDMA (A3 Ultra, A4)."""
    node_networks: NotRequired[pulumi.Input[list[NodeNetwork]]]
    """The VPC and subnet names of each extra NIC, in the flavour's NIC order (TCPX 4, TCPXO 8, RDMA 9:
    the gVNIC one first, then the 8 RDMA subnets of the RoCE VPC): GpuDirectNetworks' `node_networks`.
    Left out where every pool of the flavour is on GKE's DRANET (GKE creates those networks): then no
    GKENetworkParamSet or Network is declared. Defaults to none."""
    tolerations: NotRequired[list[Toleration]]
    """Checked and accepted for compatibility, but no longer needed: the installers tolerate every
    taint (`operator: Exists`, as Google's manifests), so a pool's own taints never keep them off its
    nodes. Defaults to none."""
    gpudirect_cidr: NotRequired[str]
    """The GPUDirect range the flavour's NIC subnets are slots of (GpuDirectNetworks' `cidr`): TCPXO's
    host firewall rule accepts inbound TCP from those subnets only. Defaults to 192.168.0.0/16."""
    node_pools: NotRequired[list[str]]
    """The GPUDirect node pools: the installers run on their nodes only. Without it they run on every
    node with the flavour's accelerator, as Google's manifests do; a pool of that accelerator without
    GPUDirect then gets the NCCL plugin in its driver directory (and, for TCPXO, the host firewall
    opened to TCP). Defaults to every node of the accelerator."""
    image_digests: NotRequired[dict[str, str]]
    """Digests (`sha256:<64 lowercase hex>`) by image name without its tag, for the privileged images
    the flavour names by tag (its NCCL plugin installer; TCPXO's pre-install step, `ubuntu`): each
    runs as `<name>:<tag>@<digest>`. Defaults to the digests NVIDIA's manifests publish for these tags
    (gpudirect/images.py PUBLISHED_DIGESTS: TCPXO's installer and `ubuntu`), the others by tag."""


class _GpuDirectSoftwareSpec(ArgsModel):
    flavor: enum_values(GpuDirectFlavor)  # type: ignore[valid-type]
    node_networks: NodeNetworks | None = None
    tolerations: list[TolerationSpec] = Field(default_factory=list, max_length=64)
    node_pools: Annotated[list[K8sName], Field(min_length=1, max_length=64)] | None = None
    gpudirect_cidr: Cidr = DEFAULT_GPUDIRECT_CIDR
    image_digests: ImageDigests = Field(default_factory=dict)


def _rules(spec: _GpuDirectSoftwareSpec) -> list[str]:
    checked = Problems()
    check_digests("image_digests", spec.image_digests, NODE_IMAGES_BY_TAG[spec.flavor], checked)
    problems = checked.items
    # Only what the firewall rule needs (GpuDirectNetworks checks the range in full, once a render).
    try:
        too_small = ipaddress.ip_network(spec.gpudirect_cidr).prefixlen > MAX_GPUDIRECT_PREFIX
    except ValueError:
        too_small = None
    if too_small is not False:
        problems.append(
            Problem(
                "gpudirect_cidr",
                f"{cut(spec.gpudirect_cidr)} is not allowed: expected the GPUDirect range, an IPv4 network "
                f"of /{MAX_GPUDIRECT_PREFIX} or larger with no host bits set (GpuDirectNetworks' cidr)",
            )
        )
    flavor = FLAVORS[GpuDirectFlavor(spec.flavor)]
    expected = len(flavor.nics)
    if flavor.dranet_on_stack_networks and spec.node_networks is not None:
        problems.append(
            Problem("node_networks", f"not allowed with {spec.flavor}: Pods claim its NICs through DRANET")
        )
    elif isinstance(spec.node_networks, list) and len(spec.node_networks) != expected:
        problems.append(
            Problem(
                "node_networks",
                f"{len(spec.node_networks)} given; {spec.flavor} has {expected} extra NICs, each needs its "
                "VPC and subnet (in the flavour's NIC order)",
            )
        )
    for i, toleration in enumerate(spec.tolerations):
        check_toleration(f"tolerations[{i}]", toleration, checked)
    return problems


class GpuDirectSoftware(GkeGpuComponent[_GpuDirectSoftwareSpec]):
    """What one GPUDirect flavour needs inside the cluster (one instance per flavour present).

    Per extra NIC: a `GKENetworkParamSet` (its VPC and subnet, deviceMode NetDevice for gVNIC, RDMA
    for MRDMA NICs) and the `Network` Pods name in their `networking.gke.io/interfaces` annotation,
    both cluster-scoped (`networking.gke.io/v1`; the cluster needs Dataplane V2 and multi-networking).

    In kube-system, on the flavour's nodes only (node affinity on their accelerator, as Google's): the
    NCCL plugin installer DaemonSet (TCPX, TCPXO; gIB for RDMA) and, for TCPX and TCPXO, the NRI
    device injector, which gives the workloads' RxDM sidecar the GPU devices so that it need not be
    privileged. Both are privileged by necessity, with host PID and host network as Google's
    manifests have them (each privilege is commented in `_daemon_set`); otherwise they mount no
    service account token, request and cap their resources, and run at system-node-critical
    priority (evicted last, as Google's). The workloads' side is `gpudirect_pod_parts` in
    gpudirect/pod_parts.py."""

    network_names: pulumi.Output[list[str]]
    """The Network names, in the flavour's NIC order."""
    flavor: pulumi.Output[str]
    """The GPUDirect flavour."""

    _args_model = _GpuDirectSoftwareSpec
    _args_rules = staticmethod(_rules)
    _args_type = GpuDirectSoftwareArgs

    def __init__(
        self,
        name: str,
        /,
        args: GpuDirectSoftwareArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        self._node_pools = spec.node_pools
        # Upstream's published digests, unless the stack records its own.
        self._digests = {**published_digests(), **spec.image_digests}
        flavor = GpuDirectFlavor(spec.flavor)
        flavor_spec = FLAVORS[flavor]
        labels = app_labels(f"gpudirect-{flavor.lower()}", component="network")
        networks = spec.node_networks
        nics = flavor_spec.nics if networks is not None else ()
        for index, nic in enumerate(nics):
            assert networks is not None
            device_network(
                self,
                f"{name}-{nic.network_name}",
                nic.network_name,
                {
                    "vpc": node_network_at(networks, index, "network"),
                    "vpcSubnet": node_network_at(networks, index, "subnetwork"),
                    "deviceMode": nic.device_mode,
                },
                labels,
            )
        # Every taint is tolerated already: `spec.tolerations` adds nothing to it.
        tolerations = [k8s.core.v1.TolerationArgs(**t) for t in NODE_TOLERATIONS]  # type: ignore[arg-type]
        self._gpu_nic_ranges = [subnet_range(spec.gpudirect_cidr, nic) for nic in flavor_spec.created_subnets]
        installer = INSTALLERS.get(flavor)
        if installer is None:
            # A4X Max: gIB comes in the workload's image; its nodes run ASAPD-lite (asapd.py).
            asapd_lite_daemon_set(f"{name}-asapd-lite", flavor_spec, self._node_pools, self._digests, self)
        else:
            self._install(name, flavor, installer, tolerations)
        self.network_names = pulumi.Output.from_input(
            [nic.network_name for nic in flavor_spec.nics] if networks is not None else []
        )
        self.flavor = pulumi.Output.from_input(flavor.value)
        self.register_outputs({"networkNames": self.network_names, "flavor": self.flavor})

    def _install(
        self,
        name: str,
        flavor: GpuDirectFlavor,
        installer: _Installer,
        tolerations: "list[k8s.core.v1.TolerationArgs]",
    ) -> None:
        self._daemon_set(
            f"{name}-installer",
            installer.daemon_set or installer.name,
            flavor,
            tolerations,
            installer=installer,
        )
        if installer.nri_injector:
            self._daemon_set(
                f"{name}-device-injector", f"nri-device-injector-{flavor.lower()}", flavor, tolerations
            )

    def _daemon_set(
        self,
        resource_name: str,
        object_name: str,
        flavor: GpuDirectFlavor,
        tolerations: "list[k8s.core.v1.TolerationArgs]",
        *,
        installer: _Installer | None = None,
    ) -> "k8s.apps.v1.DaemonSet":
        """The installer (init containers, then pause) or, without one, the NRI device injector."""
        image = installer.image if installer else NRI_DEVICE_INJECTOR
        component = "nccl-installer" if installer else "nri-device-injector"
        labels = app_labels(object_name, component=component, version=image_version(image))
        # Privileged: the installers write the plugin into host directories and (TCPXO) load a
        # kernel module, mount devices and change the host firewall; the injector talks to
        # containerd's NRI socket and opens host devices for the containers it injects them into.
        privileged = k8s.core.v1.SecurityContextArgs(privileged=True)
        init_containers: list[k8s.core.v1.ContainerArgs] = []
        containers: list[k8s.core.v1.ContainerArgs]
        dirs: tuple[_HostDir, ...]
        if installer:
            dirs = installer.dirs
            if installer.pre_install:
                init_containers.append(
                    k8s.core.v1.ContainerArgs(
                        name="pre-installation",
                        image=pinned(TCPXO_PRE_INSTALL, self._digests),
                        security_context=privileged,
                        # Host PID namespace (hostPID below) lets nsenter reach the host's PID 1.
                        command=[
                            "nsenter",
                            "-at",
                            "1",
                            "--",
                            "bash",
                            "-c",
                            installer.pre_install(self._gpu_nic_ranges),
                        ],
                        resources=resources("50m", "64Mi", "500m", "256Mi"),
                    )
                )
            init_containers.append(
                k8s.core.v1.ContainerArgs(
                    name=installer.name,
                    image=pinned(installer.image, self._digests),
                    security_context=privileged,
                    command=["/bin/sh", "-c"],
                    args=[installer.script],
                    volume_mounts=[
                        k8s.core.v1.VolumeMountArgs(name=d.name, mount_path=d.mount_path) for d in dirs
                    ],
                    # Google requests 150m CPU; the memory figures are ours (UNVERIFIED on a node).
                    resources=resources("150m", "256Mi", "1", "1Gi"),
                )
            )
            containers = [
                k8s.core.v1.ContainerArgs(
                    name="pause",
                    image=PAUSE,
                    resources=resources("10m", "16Mi", "50m", "32Mi"),
                    security_context=k8s.core.v1.SecurityContextArgs(
                        run_as_user=65535,
                        run_as_non_root=True,
                        allow_privilege_escalation=False,
                        read_only_root_filesystem=True,
                        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                    ),
                )
            ]
        else:
            # /dev: the device nodes it injects; /var/run/nri: containerd's NRI plugin socket.
            dirs = (_HostDir("dev", "/dev", "/dev"), _HostDir("nri", "/var/run/nri", "/var/run/nri"))
            containers = [
                k8s.core.v1.ContainerArgs(
                    name="device-injector",
                    image=NRI_DEVICE_INJECTOR,
                    security_context=privileged,
                    volume_mounts=[
                        k8s.core.v1.VolumeMountArgs(name=d.name, mount_path=d.mount_path) for d in dirs
                    ],
                    resources=resources("150m", "64Mi", "500m", "256Mi"),
                )
            ]
        return k8s.apps.v1.DaemonSet(
            resource_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=object_name, namespace=NAMESPACE, labels=labels),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
                update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        priority_class_name="system-node-critical",
                        affinity=node_affinity(FLAVORS[flavor], self._node_pools),
                        tolerations=tolerations,
                        # Host network and host PID as in Google's manifests: TCPXO's pre-install
                        # step enters PID 1's namespaces; the install scripts and the injector (which
                        # enables NRI on the node) are opaque, so whether the others can drop them
                        # is UNVERIFIED.
                        host_network=True,
                        host_pid=True,
                        # None of them calls the Kubernetes API.
                        automount_service_account_token=False,
                        enable_service_links=False,
                        # Takes effect on the unprivileged pause container (containerd runs
                        # privileged containers unconfined).
                        security_context=k8s.core.v1.PodSecurityContextArgs(
                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")
                        ),
                        init_containers=init_containers or None,
                        containers=containers,
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name=d.name,
                                host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=d.host_path, type=d.type),
                            )
                            for d in dirs
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
