"""NVIDIA's Kubernetes device plugin, for clusters that are not GKE (GKE ships its own)."""

import hashlib
from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pydantic import Field

from ..core import images
from ..core.arg_types import LabelKey, LabelValue
from ..core.common import GPU_RESOURCE, Problems
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.image_digests import ImageDigests, check_digests, pinned
from ..core.k8s import app_labels, image_version, selector_labels
from ..core.model import DNS_LABEL
from ..core.validation import ArgsModel
from .device_plugin_config import DevicePluginSettings, TimeSlicingReplicas

DEVICE_PLUGIN_PATH = "/var/lib/kubelet/device-plugins"
CONFIG_DIR = "/etc/nvidia-device-plugin"


class NvidiaDevicePluginArgs(TypedDict):
    """Where the device plugin runs and how it shares the GPUs."""

    node_selector: dict[str, str]
    """Labels of the GPU nodes (at least one): the plugin runs only there (on any other node it would
    crash-loop)."""
    time_slicing_replicas: NotRequired[int]
    """Advertise each GPU as this many nvidia.com/gpu through time-slicing (2 to 1024). Defaults to
    whole GPUs."""
    runtime_class_name: NotRequired[str]
    """The RuntimeClass of the NVIDIA container runtime, where it is not containerd's default.
    Defaults to none."""
    namespace: NotRequired[str]
    """The namespace of the DaemonSet. Defaults to kube-system."""
    image_digests: NotRequired[dict[str, str]]
    """The plugin image's digest (`sha256:<64 lowercase hex>`) by its name without the tag
    (nvcr.io/nvidia/k8s-device-plugin): it then runs as `<name>:<tag>@<digest>`. Defaults to none."""


class _DevicePluginPlace(ArgsModel):
    node_selector: Annotated[dict[LabelKey, LabelValue], Field(min_length=1, max_length=64)]
    time_slicing_replicas: TimeSlicingReplicas | None = None


class _NvidiaDevicePluginSpec(DevicePluginSettings, _DevicePluginPlace):
    """NvidiaDevicePlugin's args as checked: the nodes and the sharing, then the settings a stack
    file's devicePlugin section has too (one model, read here by snake_case name)."""

    namespace: Annotated[str, Field(max_length=63, pattern=DNS_LABEL)] = "kube-system"
    image_digests: ImageDigests = Field(default_factory=dict)


def _rules(spec: _NvidiaDevicePluginSpec) -> list[str]:
    problems = Problems()
    check_digests("image_digests", spec.image_digests, [images.DEVICE_PLUGIN], problems)
    return problems.items


class NvidiaDevicePlugin(GkeGpuComponent[_NvidiaDevicePluginSpec]):
    """The device plugin DaemonSet (apps/v1) that advertises `nvidia.com/gpu` to the kubelet.

    It runs in kube-system with `system-node-critical` priority (evicted last), tolerates the GPU
    taint, mounts only the kubelet's device-plugin directory, and runs without privilege escalation
    and with every capability dropped (NVIDIA's default manifest), plus seccomp `RuntimeDefault` and
    a read-only root filesystem: the plugin writes only its socket, into the device-plugin
    directory. GPUs reach it through the NVIDIA container toolkit: the node's default containerd
    runtime, or `runtime_class_name`.

    With time-slicing, its config file comes from a ConfigMap; the config's hash is a Pod template
    annotation, so a change rolls the DaemonSet (the plugin reads its config only at start).
    """

    namespace: pulumi.Output[str]
    """The namespace of the DaemonSet."""
    time_slicing_replicas: pulumi.Output[int] | None
    """nvidia.com/gpu advertised per GPU with time-slicing; none for whole GPUs."""

    _args_model = _NvidiaDevicePluginSpec
    _args_rules = staticmethod(_rules)
    _args_by_name = True

    def __init__(
        self,
        name: str,
        /,
        args: NvidiaDevicePluginArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        labels = app_labels(
            "nvidia-device-plugin", component="device-plugin", version=image_version(images.DEVICE_PLUGIN)
        )
        pod_annotations: dict[str, str] = {}
        volumes = [
            k8s.core.v1.VolumeArgs(
                name="device-plugin",
                host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=DEVICE_PLUGIN_PATH, type="Directory"),
            )
        ]
        mounts = [k8s.core.v1.VolumeMountArgs(name="device-plugin", mount_path=DEVICE_PLUGIN_PATH)]
        env = [
            # One nvidia.com/gpu per GPU (or per MIG device when a node enables MIG single strategy).
            k8s.core.v1.EnvVarArgs(name="MIG_STRATEGY", value="single"),
            k8s.core.v1.EnvVarArgs(name="FAIL_ON_INIT_ERROR", value="true"),
        ]
        depends_on: list[pulumi.Resource] = []
        self.config_map: k8s.core.v1.ConfigMap | None = None
        if spec.time_slicing_replicas:
            config_text = time_slicing_config(spec.time_slicing_replicas)
            self.config_map = k8s.core.v1.ConfigMap(
                f"{name}-config",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name="nvidia-device-plugin-config", namespace=spec.namespace, labels=labels
                ),
                data={"config.yaml": config_text},
                opts=pulumi.ResourceOptions(parent=self),
            )
            depends_on.append(self.config_map)
            pod_annotations["gke-gpu/config-sha256"] = hashlib.sha256(config_text.encode()).hexdigest()
            volumes.append(
                k8s.core.v1.VolumeArgs(
                    name="config",
                    config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name="nvidia-device-plugin-config"),
                )
            )
            mounts.append(k8s.core.v1.VolumeMountArgs(name="config", mount_path=CONFIG_DIR, read_only=True))
            env.append(k8s.core.v1.EnvVarArgs(name="CONFIG_FILE", value=f"{CONFIG_DIR}/config.yaml"))

        self.daemon_set: k8s.apps.v1.DaemonSet = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="nvidia-device-plugin-daemonset", namespace=spec.namespace, labels=labels
            ),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
                update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels, annotations=pod_annotations or None),
                    spec=k8s.core.v1.PodSpecArgs(
                        priority_class_name="system-node-critical",
                        node_selector=dict(spec.node_selector),
                        runtime_class_name=spec.runtime_class_name,
                        automount_service_account_token=False,
                        enable_service_links=False,
                        security_context=k8s.core.v1.PodSecurityContextArgs(
                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")
                        ),
                        tolerations=[
                            k8s.core.v1.TolerationArgs(
                                key=GPU_RESOURCE, operator="Exists", effect="NoSchedule"
                            ),
                            k8s.core.v1.TolerationArgs(key="CriticalAddonsOnly", operator="Exists"),
                        ],
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="nvidia-device-plugin-ctr",
                                image=pinned(images.DEVICE_PLUGIN, spec.image_digests),
                                image_pull_policy="IfNotPresent",
                                env=env,
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "50m", "memory": "64Mi"},
                                    limits={"cpu": "200m", "memory": "256Mi"},
                                ),
                                security_context=k8s.core.v1.SecurityContextArgs(
                                    allow_privilege_escalation=False,
                                    read_only_root_filesystem=True,
                                    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                ),
                                volume_mounts=mounts,
                            )
                        ],
                        volumes=volumes,
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )
        self.namespace = pulumi.Output.from_input(spec.namespace)
        replicas = spec.time_slicing_replicas
        self.time_slicing_replicas = None if replicas is None else pulumi.Output.from_input(replicas)
        self.register_outputs(
            {"namespace": self.namespace, "timeSlicingReplicas": self.time_slicing_replicas}
        )


def time_slicing_config(replicas: int) -> str:
    """The device plugin's config file: every GPU advertised as `replicas` nvidia.com/gpu."""
    document = {
        "version": "v1",
        "flags": {"migStrategy": "single"},
        "sharing": {
            "timeSlicing": {
                # Keep the resource name nvidia.com/gpu, and refuse requests for more than one shared
                # GPU (they would not get more compute, only more slices of the same GPU).
                "renameByDefault": False,
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": GPU_RESOURCE, "replicas": replicas}],
            }
        },
    }
    return yaml.safe_dump(document, sort_keys=False)
