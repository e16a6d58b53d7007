"""ASAPD-lite: the node agent A4X Max (GB300 bare metal) GPUDirect nodes run to bring up their
ConnectX-8 RDMA interfaces, as cluster-toolkit's A4X Max blueprint installs it.

Source: GoogleCloudPlatform/cluster-toolkit @1047080375af (2026-06-25)
examples/gke-a4x-max-bm/asapd-lite-installer.yaml (image tag of commit 42b5dbb09, 2026-06-07), written
here as our own object; the facts taken from it: the image, its entry script
`/usr/local/bin/run_asapd_lite.sh`, privileged with the host's network and PID namespaces ("essential
for managing the host's CX PFs"), priority class system-node-critical, every taint tolerated, the
health endpoint `/healthz` on port 19540 (liveness after 60 s, readiness), the host paths it mounts,
`LD_LIBRARY_PATH=/asapd-lite/controller`, `hugepages-2Mi: 8192Mi` and 1024Mi of memory as limits,
rolling updates of 1% of the nodes at a time, and the restart when an interface's IPv6 address failed
duplicate address detection. The node pool's 4096 huge pages of 2 MiB (gpu/bare_metal.py) are what it
takes. What the agent itself does beyond that comment is not documented on any page read (UNVERIFIED).
"""

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from ..core.image_digests import pinned
from ..core.k8s import app_labels, image_version, selector_labels
from .flavors import FlavorSpec
from .images import ASAPD_LITE
from .node_parts import node_affinity

DAEMON_SET = "asapd-lite"
HEALTH_PORT = 19540
# (volume, host path, mount path, hostPath type)
_HOST_DIRS = (
    ("host-sys", "/sys", "/sys", None),
    ("host-proc", "/proc", "/proc", None),
    ("host-udev-rules", "/etc/udev/rules.d", "/etc/udev/rules.d", None),
    ("host-run-udev", "/run/udev", "/run/udev", None),
    ("host-run-asapd-lite", "/run/asapd-lite", "/run/asapd-lite", "DirectoryOrCreate"),
    ("var-log-asapd-lite", "/var/log/google/asapd-lite", "/var/log/google/asapd-lite", "DirectoryOrCreate"),
    ("var-lib-asapd-lite", "/var/lib/google/asapd-lite", "/var/lib/google/asapd-lite", "DirectoryOrCreate"),
    ("host-systemd-system", "/etc/systemd/system", "/etc/systemd/system", None),
    ("host-run-systemd", "/run/systemd", "/run/systemd", None),
)
# Start the agent, give the interfaces time to come up, then exit (so the kubelet restarts the
# container) while any GPU interface holds an IPv6 address that failed duplicate address detection,
# after cycling that interface; otherwise stay up with the agent.
SCRIPT = """set -x
/usr/local/bin/run_asapd_lite.sh
sleep 15
restart=0
for nic in $(ip -o link show | awk -F': ' '{print $2}' | grep gpu); do
  if ip -6 addr show dev "$nic" | grep -q dadfailed; then
    ip link set dev "$nic" down && ip link set dev "$nic" up
    restart=1
  fi
done
[ "$restart" -eq 0 ] || exit 1
wait
"""


def asapd_lite_daemon_set(
    resource_name: str,
    flavor: FlavorSpec,
    node_pools: list[str] | None,
    digests: Mapping[str, str],
    parent: pulumi.Resource,
) -> k8s.apps.v1.DaemonSet:
    """ASAPD-lite on the flavour's nodes (its accelerator, arm64, and `node_pools` when given)."""
    labels = app_labels(DAEMON_SET, component="rdma-agent", version=image_version(ASAPD_LITE))
    probe = k8s.core.v1.HTTPGetActionArgs(path="/healthz", port=HEALTH_PORT)
    mounts = [k8s.core.v1.VolumeMountArgs(name=n, mount_path=m) for n, _, m, _ in _HOST_DIRS]
    mounts.append(k8s.core.v1.VolumeMountArgs(name="hugepage-2mi", mount_path="/hugepages-2Mi"))
    volumes = [
        k8s.core.v1.VolumeArgs(name=n, host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=h, type=t))
        for n, h, _, t in _HOST_DIRS
    ]
    volumes.append(
        k8s.core.v1.VolumeArgs(
            name="hugepage-2mi", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(medium="HugePages-2Mi")
        )
    )
    return k8s.apps.v1.DaemonSet(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=DAEMON_SET, namespace="kube-system", labels=labels),
        spec=k8s.apps.v1.DaemonSetSpecArgs(
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
            update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(
                type="RollingUpdate",
                rolling_update=k8s.apps.v1.RollingUpdateDaemonSetArgs(max_unavailable="1%"),
            ),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                spec=k8s.core.v1.PodSpecArgs(
                    priority_class_name="system-node-critical",
                    affinity=node_affinity(flavor, node_pools),
                    tolerations=[k8s.core.v1.TolerationArgs(operator="Exists")],
                    host_network=True,
                    host_pid=True,
                    # It does not call the Kubernetes API.
                    automount_service_account_token=False,
                    enable_service_links=False,
                    containers=[
                        k8s.core.v1.ContainerArgs(
                            name="asapd-lite",
                            image=pinned(ASAPD_LITE, digests),
                            command=["/bin/bash", "-c"],
                            args=[SCRIPT],
                            env=[
                                k8s.core.v1.EnvVarArgs(name="LD_LIBRARY_PATH", value="/asapd-lite/controller")
                            ],
                            liveness_probe=k8s.core.v1.ProbeArgs(http_get=probe, initial_delay_seconds=60),
                            readiness_probe=k8s.core.v1.ProbeArgs(http_get=probe),
                            # Privileged: it changes the host's network devices and udev rules.
                            security_context=k8s.core.v1.SecurityContextArgs(privileged=True),
                            # Google's limits; its requests default to them (written out here).
                            resources=k8s.core.v1.ResourceRequirementsArgs(
                                requests={"hugepages-2Mi": "8192Mi", "memory": "1024Mi"},
                                limits={"hugepages-2Mi": "8192Mi", "memory": "1024Mi"},
                            ),
                            volume_mounts=mounts,
                        )
                    ],
                    volumes=volumes,
                ),
            ),
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
