"""The NVIDIA driver on DRA-GPU pools: Google's driver installer DaemonSet for Container-Optimized OS,
scoped to the pools GKE creates without a driver.

GKE does not install the GPU driver on a pool whose GPUs DRA hands out ("Automatic GPU driver
installation isn't supported with DRA"; such a pool is created with `gpu-driver-version=disabled`:
GKE's "Prepare GKE infrastructure for DRA workloads", docs.cloud.google.com/kubernetes-engine/docs/
how-to/set-up-dra, read 2026-11). Without a driver the DRA driver's kubelet plugin finds no GPU and
no claim is ever allocated. The pools run COS (`COS_CONTAINERD`, gpu/node_pool.py), so the installer
is Google's COS one.

Source (a published manifest mirrored field by field, not code):
GoogleCloudPlatform/container-engine-accelerators@992db81257553607f1477945f1b3219632991829
(2026-06-11, the commit gpudirect/images.py pins), vendored with that header in
tests/upstream/container-engine-accelerators/nvidia-driver-installer/cos/:

* `daemonset-preloaded-latest.yaml` (last changed f2cf4197, 2025-07-02): the installer image GKE
  preloads on COS nodes (`cos-nvidia-installer:fixed`, `imagePullPolicy: Never`) runs
  `/cos-gpu-installer install --version=latest`, the same "latest" driver `gpu-driver-version=latest`
  installs (the vLLM image needs R580+: serving on a DRA pool relies on it), then `partition-gpus`
  (MIG, a no-op without a partition config) and a pause container;
* `daemonset-preloaded-latest-a4x.yaml` (last changed 2dd8fc9b, 2025-03-07): the same for A4X
  (GB200, Arm), without `partition-gpus`, on `a4x-highgpu-4g(-nolssd)` nodes only.

Both select nodes with a GPU and without `cloud.google.com/gke-gpu-driver-version` (the label of a
node whose driver GKE installs). Here one more expression scopes them to the DRA pools by name
(`cloud.google.com/gke-nodepool In [...]`), so the DaemonSet never runs where GKE installs the driver
or on another pool whose driver a user installs their own way. Its name differs from upstream's
(`nvidia-driver-installer`) so that a copy a user applied by hand is not taken over; delete that copy
(docs/configuration.md, "DRA GPUs").
"""

from __future__ import annotations

from enum import StrEnum

import pulumi_kubernetes as k8s

from ..core.common import NODEPOOL_LABEL
from ..core.k8s import GKE_DRIVER_HOST_DIR, app_labels
from ..core.nodes import ACCELERATOR_LABEL
from ..core.nodes import DRIVER_LABEL as DRIVER_VERSION_LABEL

# The same pause image as Google's GPUDirect installers pin.
from ..gpudirect.images import PAUSE as PAUSE_IMAGE
from .claims import NO_INSTALLER_ACCELERATORS

INSTALLER_COMMIT = "992db81257553607f1477945f1b3219632991829"
# The installer image GKE preloads on COS GPU nodes (never pulled), and upstream's pinned images.
INSTALLER_IMAGE = "cos-nvidia-installer:fixed"
PARTITION_GPUS_IMAGE = (
    "gcr.io/gke-release/nvidia-partition-gpu"
    "@sha256:de12f85ebfb4fb6c1893cd30c23aab662a72fa0448f97ef74fccb82d7522ef17"
)
CONFIDENTIAL_NODES_LABEL = "cloud.google.com/gke-confidential-nodes-instance-type"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
A4X_MACHINE_TYPES = ["a4x-highgpu-4g", "a4x-highgpu-4g-nolssd"]
# What the installer script does (verbatim): skip a node whose driver is loaded, else install COS's
# latest driver and open its directory to the containers that mount it.
INSTALL_SCRIPT = """echo "Checking for existing GPU driver modules"
if lsmod | grep nvidia; then
  echo "GPU driver is already installed, the installed version may or may not be the driver version being tried to install, skipping installation"
  exit 0
else
  echo "No GPU driver module detected, installing now"
  /cos-gpu-installer install --version=latest || exit 1
  chmod 755 /root/home/kubernetes/bin/nvidia
fi
"""  # noqa: E501 (upstream's script, verbatim)


class InstallerVariant(StrEnum):
    """Which of Google's COS installer manifests a pool takes."""

    COS = "cos"  # nvidia-driver-installer/cos/daemonset-preloaded-latest.yaml
    COS_A4X = "cos-a4x"  # nvidia-driver-installer/cos/daemonset-preloaded-latest-a4x.yaml


# The accelerators whose pools take the A4X manifest; GB300 (A4X Max, bare metal) has none upstream.
A4X_ACCELERATORS = frozenset({"nvidia-gb200"})


def installer_name(variant: InstallerVariant) -> str:
    return "nvidia-driver-installer-dra" + ("-a4x" if variant is InstallerVariant.COS_A4X else "")


def _host_path(name: str, path: str) -> k8s.core.v1.VolumeArgs:
    return k8s.core.v1.VolumeArgs(name=name, host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=path))


def _mount(name: str, path: str) -> k8s.core.v1.VolumeMountArgs:
    return k8s.core.v1.VolumeMountArgs(name=name, mount_path=path)


def _node_affinity(variant: InstallerVariant, node_pools: list[str]) -> k8s.core.v1.AffinityArgs:
    def expression(
        key: str, operator: str, values: list[str] | None = None
    ) -> k8s.core.v1.NodeSelectorRequirementArgs:
        return k8s.core.v1.NodeSelectorRequirementArgs(key=key, operator=operator, values=values)

    if variant is InstallerVariant.COS_A4X:
        upstream = [
            expression(INSTANCE_TYPE_LABEL, "In", A4X_MACHINE_TYPES),
            expression(ACCELERATOR_LABEL, "Exists"),
            expression(DRIVER_VERSION_LABEL, "DoesNotExist"),
        ]
    else:
        upstream = [
            expression(ACCELERATOR_LABEL, "Exists"),
            expression(DRIVER_VERSION_LABEL, "DoesNotExist"),
            expression(CONFIDENTIAL_NODES_LABEL, "DoesNotExist"),
        ]
    # Ours: the DRA pools only (the expressions of a term are ANDed).
    scoped = [*upstream, expression(NODEPOOL_LABEL, "In", sorted(node_pools))]
    return k8s.core.v1.AffinityArgs(
        node_affinity=k8s.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                node_selector_terms=[k8s.core.v1.NodeSelectorTermArgs(match_expressions=scoped)]
            )
        )
    )


def installer_daemon_set(
    variant: InstallerVariant, node_pools: list[str]
) -> tuple[k8s.meta.v1.ObjectMetaArgs, k8s.apps.v1.DaemonSetSpecArgs]:
    """The DaemonSet's metadata and spec: upstream's manifest of `variant`, on `node_pools` only."""
    name = installer_name(variant)
    selector = {"k8s-app": name}
    installer = k8s.core.v1.ContainerArgs(
        name="nvidia-driver-installer",
        image=INSTALLER_IMAGE,
        image_pull_policy="Never",
        resources=k8s.core.v1.ResourceRequirementsArgs(requests={"cpu": "150m"}),
        security_context=k8s.core.v1.SecurityContextArgs(privileged=True),
        env=[
            k8s.core.v1.EnvVarArgs(name=key, value=value)
            for key, value in (
                ("NVIDIA_INSTALL_DIR_HOST", GKE_DRIVER_HOST_DIR),
                ("NVIDIA_INSTALL_DIR_CONTAINER", "/usr/local/nvidia"),
                ("VULKAN_ICD_DIR_HOST", f"{GKE_DRIVER_HOST_DIR}/vulkan/icd.d"),
                ("VULKAN_ICD_DIR_CONTAINER", "/etc/vulkan/icd.d"),
                ("ROOT_MOUNT_DIR", "/root"),
                ("COS_TOOLS_DIR_HOST", "/var/lib/cos-tools"),
                ("COS_TOOLS_DIR_CONTAINER", "/build/cos-tools"),
            )
        ],
        volume_mounts=[
            _mount("nvidia-install-dir-host", "/usr/local/nvidia"),
            _mount("vulkan-icd-mount", "/etc/vulkan/icd.d"),
            _mount("dev", "/dev"),
            _mount("root-mount", "/root"),
            _mount("cos-tools", "/build/cos-tools"),
        ],
        command=["bash", "-c", INSTALL_SCRIPT],
    )
    init_containers = [installer]
    if variant is InstallerVariant.COS:
        init_containers.append(
            k8s.core.v1.ContainerArgs(
                name="partition-gpus",
                image=PARTITION_GPUS_IMAGE,
                env=[k8s.core.v1.EnvVarArgs(name="LD_LIBRARY_PATH", value="/usr/local/nvidia/lib64")],
                resources=k8s.core.v1.ResourceRequirementsArgs(requests={"cpu": "150m"}),
                security_context=k8s.core.v1.SecurityContextArgs(privileged=True),
                volume_mounts=[
                    _mount("nvidia-install-dir-host", "/usr/local/nvidia"),
                    _mount("dev", "/dev"),
                    _mount("nvidia-config", "/etc/nvidia"),
                ],
            )
        )
    metadata = k8s.meta.v1.ObjectMetaArgs(
        name=name,
        namespace="kube-system",  # as Google's
        labels={**selector, **app_labels(name, component="gpu-driver-installer")},
    )
    spec = k8s.apps.v1.DaemonSetSpecArgs(
        selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
        update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
        template=k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(labels={"name": name, **selector}),
            spec=k8s.core.v1.PodSpecArgs(
                priority_class_name="system-node-critical",
                affinity=_node_affinity(variant, node_pools),
                tolerations=[k8s.core.v1.TolerationArgs(operator="Exists")],
                host_network=True,
                host_pid=True,
                # Ours, as GPUDirect's installers (gpudirect/software.py): nothing here calls the
                # Kubernetes API, and RuntimeDefault takes effect on the unprivileged pause container
                # (containerd runs privileged containers unconfined).
                automount_service_account_token=False,
                enable_service_links=False,
                security_context=k8s.core.v1.PodSecurityContextArgs(
                    seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")
                ),
                volumes=[
                    _host_path("dev", "/dev"),
                    _host_path("vulkan-icd-mount", f"{GKE_DRIVER_HOST_DIR}/vulkan/icd.d"),
                    _host_path("nvidia-install-dir-host", GKE_DRIVER_HOST_DIR),
                    _host_path("root-mount", "/"),
                    _host_path("cos-tools", "/var/lib/cos-tools"),
                    _host_path("nvidia-config", "/etc/nvidia"),
                ],
                init_containers=init_containers,
                containers=[
                    k8s.core.v1.ContainerArgs(
                        name="pause",
                        image=PAUSE_IMAGE,
                        # Ours, as GPUDirect's installers' pause: it only keeps the Pod up.
                        resources=k8s.core.v1.ResourceRequirementsArgs(
                            requests={"cpu": "10m", "memory": "16Mi"}, limits={"cpu": "50m", "memory": "32Mi"}
                        ),
                        security_context=k8s.core.v1.SecurityContextArgs(
                            run_as_user=65535,
                            run_as_non_root=True,
                            allow_privilege_escalation=False,
                            read_only_root_filesystem=True,
                            capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                        ),
                    )
                ],
            ),
        ),
    )
    return metadata, spec


def installer_variant(accelerator: str) -> InstallerVariant | None:
    """The manifest a DRA pool of `accelerator` takes; None where Google publishes none (GB300)."""
    if accelerator in NO_INSTALLER_ACCELERATORS:
        return None
    return InstallerVariant.COS_A4X if accelerator in A4X_ACCELERATORS else InstallerVariant.COS
