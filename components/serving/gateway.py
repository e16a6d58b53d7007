"""InferenceGateway: GKE's Inference Gateway in front of an InferenceService: an internal regional
Gateway, an HTTPRoute to the service's InferencePool, and the pool's endpoint picker (EPP) from its
pinned upstream Helm chart."""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core import images
from ..core.arg_types import matching
from ..core.common import K8S_NAME, Problems, network_of
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.egress import HTTPS_PORT, egress_policy_spec
from ..core.k8s import NONROOT_ID, app_labels, selector_labels
from ..core.model import Cidr
from ..core.validation import ArgsModel
from .epp_config import pd_epp_values
from .leader_worker_set import ROLE_LABEL
from .model import MAX_SERVICE_NAME, SERVICE_NAME_MEANING, service_namespace
from .server_parts import PORT, server_labels

# llm-d-router's chart: the EPP and the InferencePool (inference.networking.k8s.io/v1). Both left
# gateway-api-inference-extension before its v1.6.0 (README: "moved to llm-d/llm-d-router"; commit
# a70292c1 removed the inferencepool chart); llm-d-router's release workflow pushes the chart to
# ghcr.io/llm-d/charts with the tag as its version (docs/serving.md, "The Inference Gateway").
EPP_CHART = "oci://ghcr.io/llm-d/charts/llm-d-router-gateway"
EPP_VERSION = "v0.10.0"
GATEWAY_API = "gateway.networking.k8s.io/v1"
INFERENCE_GROUP = "inference.networking.k8s.io"
# GKE's regional internal Application Load Balancer: reachable from the VPC only, and it needs a
# proxy-only subnet in the cluster's region.
GATEWAY_CLASS = "gke-l7-rilb"
LISTENER_PORT = 80
# The chart's EPP ports (routerlib values and templates at v0.10.0): the load balancer's ext_proc calls
# on 9002, its gRPC health checks on 9003 (which GKE's Gateway controller checks by default).
EXT_PROC_PORT, EPP_HEALTH_PORT = 9002, 9003
# Where Google's health checks come from (Cloud Load Balancing, "Firewall rules"); the proxies
# themselves connect from the proxy-only subnet.
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
# The chart asks for 8 CPUs and 8 GiB (16 GiB limit, no CPU limit), sized for llm-d's large pools; one
# small pool's picker needs far less (UNVERIFIED under load). A system pool node has 4 vCPUs.
EPP_RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}


class InferenceGatewayArgs(TypedDict):
    """The service the gateway fronts, and where the load balancer's proxies come from."""

    service: str
    """The InferenceService's name: everything goes in its namespace `serve-<service>`, and the
    InferencePool selects its server Pods (port 8000)."""
    proxy_only_cidr: str
    """The range of the VPC's proxy-only subnet in the cluster's region (GkeNetwork's
    `proxy_only_cidr`): the load balancer's proxies reach the server and the endpoint picker from it,
    so the NetworkPolicies admit it."""
    leaders_only: NotRequired[bool]
    """The service is a LeaderWorkerSet (a replica over several nodes): the InferencePool takes only
    its leaders, the Pods that run the API server. Defaults to false (every server Pod)."""
    disaggregated: NotRequired[bool]
    """The service runs prefill and decode apart (InferenceService's `disaggregation`): the picker
    runs llm-d's P/D profiles (serving/epp_config.py), choosing a decode Pod and, for its routing
    sidecar, a prefill Pod. Defaults to false."""
    target_ports: NotRequired[list[int]]
    """The server Pods' ports the pool sends requests to: one a data-parallel rank from 8000 with
    expert parallel. Defaults to [8000]."""


class InferenceGatewaySpec(ArgsModel):
    service: matching(K8S_NAME, SERVICE_NAME_MEANING, max_length=MAX_SERVICE_NAME)  # type: ignore[valid-type]
    proxy_only_cidr: Cidr
    leaders_only: bool = False
    disaggregated: bool = False
    target_ports: Annotated[
        list[Annotated[int, Field(ge=1, le=65535)]],
        Field(default_factory=lambda: [PORT], min_length=1, max_length=16),
    ]


def _rules(spec: InferenceGatewaySpec) -> list[str]:
    problems = Problems()
    network_of(spec.proxy_only_cidr, "proxy_only_cidr", problems)
    if len(set(spec.target_ports)) < len(spec.target_ports):
        problems.add("target_ports", "lists a port more than once")
    if spec.leaders_only and spec.disaggregated:
        problems.add(
            "leaders_only",
            "not allowed with disaggregated: every Pod of a disaggregated service's roles serves",
        )
    return problems.items


def epp_name(service: str) -> str:
    """The chart's EPP Deployment and Service: `<release>-epp` (routerlib `llm-d-router.name`)."""
    return f"{service}-epp"


def epp_selector(service: str) -> dict[str, str]:
    """The chart's EPP Pod selector when it creates the InferencePool (routerlib
    `llm-d-router.selectorLabels`)."""
    return {"llm-d-router-gateway": epp_name(service)}


def pool_selector(service: str, *, leaders_only: bool = False) -> dict[str, str]:
    """The server Pods the InferencePool takes: a LeaderWorkerSet's leaders only (its workers run no
    API server and have no port), as the service's own Service selects them."""
    selector = selector_labels(server_labels(service))
    return {**selector, ROLE_LABEL: "leader"} if leaders_only else selector


def epp_values(
    service: str,
    *,
    leaders_only: bool = False,
    disaggregated: bool = False,
    target_ports: list[int] | None = None,
) -> dict[str, Any]:
    """The chart's values: an InferencePool `<service>` of the server's Pods on port 8000 (vLLM over
    HTTP; `target_ports`: a wide-EP service's ranks), one pinned EPP with bounded resources (a
    disaggregated service's with its P/D configuration), GKE's health check and backend policies, and
    no HTTPRoute (InferenceGateway declares its own)."""
    image, _, tag = images.EPP.rpartition(":")
    registry, _, repository = image.rpartition("/")
    # One replica, as llm-d's P/D guide keeps it too: the picker's in-flight accounting is per process.
    epp: dict[str, Any] = {
        "replicas": 1,
        "image": {
            "registry": registry,
            "repository": repository,
            "tag": tag,
            "pullPolicy": "IfNotPresent",
        },
        "resources": EPP_RESOURCES,
    }
    if disaggregated:
        epp |= pd_epp_values()
    return {
        "provider": {"name": "gke"},
        "router": {
            "modelServers": {
                "type": "vllm",
                "protocol": "http",
                "targetPorts": [{"number": port} for port in (target_ports or [PORT])],
                "matchLabels": pool_selector(service, leaders_only=leaders_only),
            },
            # FailOpen: with the picker down, the load balancer still sends requests to the pool.
            "inferencePool": {"create": True, "failureMode": "FailOpen"},
            "epp": epp,
        },
        "httpRoute": {"create": False},
    }


def _ingress_from(cidrs: list[str], ports: list[int]) -> k8s.networking.v1.NetworkPolicyIngressRuleArgs:
    return k8s.networking.v1.NetworkPolicyIngressRuleArgs(
        from_=[
            k8s.networking.v1.NetworkPolicyPeerArgs(ip_block=k8s.networking.v1.IPBlockArgs(cidr=cidr))
            for cidr in cidrs
        ],
        ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=port, protocol="TCP") for port in ports],
    )


def epp_egress_spec(service: str, ports: list[int] | None = None) -> k8s.networking.v1.NetworkPolicySpecArgs:
    """What the endpoint picker reaches besides DNS (the namespace's `default-deny-egress`): the
    server's Pods on their port (it reads vLLM's /metrics to pick a Pod) and the Kubernetes API on
    TCP 443 (it watches the InferencePool and its Pods). The API's address is the control plane's
    endpoint, which Dataplane V2 matches after the `kubernetes` Service is translated; this component
    does not know it (a new cluster's is assigned at creation, an existing cluster's may be anywhere),
    so port 443 is open to any address for the picker alone."""
    server = k8s.networking.v1.NetworkPolicyPeerArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(server_labels(service)))
    )
    return egress_policy_spec(
        [
            k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                to=[server],
                ports=[
                    k8s.networking.v1.NetworkPolicyPortArgs(port=port, protocol="TCP")
                    for port in ports or [PORT]
                ],
            ),
            k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=HTTPS_PORT, protocol="TCP")]
            ),
        ],
        epp_selector(service),
    )


class InferenceGateway(GkeGpuComponent[InferenceGatewaySpec]):
    """GKE's Inference Gateway in front of one InferenceService: an internal Gateway, an HTTPRoute to
    the service's InferencePool and the pool's endpoint picker, in the service's namespace.

    - llm-d-router's Helm chart (`llm-d-router-gateway`, pinned): an InferencePool `<service>`
      (`inference.networking.k8s.io/v1`) of the server's Pods on port 8000, its endpoint picker
      `<service>-epp` (one replica, bounded CPU and memory), and GKE's HealthCheckPolicy (vLLM's
      `/health`) and GCPBackendPolicy (300 s timeout) on the pool; the EPP Deployment is then patched
      to run as non-root with a read-only root filesystem and no capability (the chart has no value
      for it);
    - a Gateway `<service>` of class `gke-l7-rilb` (a regional internal Application Load Balancer,
      reachable from the VPC only) with one HTTP listener on port 80 for routes of the namespace;
    - an HTTPRoute `<service>` sending every path to the InferencePool;
    - NetworkPolicies admitting the load balancer's proxies (the proxy-only subnet) and Google's
      health checkers to the server's port and to the picker's ext_proc and health ports; the picker
      admits nothing else, and reaches only the server's port and the Kubernetes API.

    With `disaggregated`, the pool takes both roles' Pods and the picker runs llm-d's P/D profiles
    (epp_config.py): a decode Pod, then a prefill Pod for decode's routing sidecar; `target_ports` are
    an expert-parallel service's ranks' ports.

    The cluster needs GKE's Gateway API (GkeCluster's `gateway_api`), the InferencePool CRD (GKE
    installs it from 1.34.0-gke.1626000) and a proxy-only subnet in its region (GkeNetwork's
    `proxy_only_cidr`)."""

    gateway_name: pulumi.Output[str]
    """The Gateway's name, `<service>`, in `serve-<service>`."""
    inference_pool_name: pulumi.Output[str]
    """The InferencePool's name, `<service>` (the chart's release)."""
    namespace: pulumi.Output[str]
    """The service's namespace, `serve-<service>`."""

    _args_model = InferenceGatewaySpec
    _args_rules = staticmethod(_rules)

    def __init__(
        self,
        name: str,
        /,
        args: InferenceGatewayArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        service = spec.service
        namespace = service_namespace(service)
        labels = app_labels(service, component="inference-gateway")
        child = pulumi.ResourceOptions(parent=self)
        ranges = [spec.proxy_only_cidr, *HEALTH_CHECK_RANGES]
        policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{name}-server-ingress",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"{service}-gateway", namespace=namespace, labels=labels
                ),
                # Added to the server's own policy (policies add up): the proxies and health checks.
                spec=k8s.networking.v1.NetworkPolicySpecArgs(
                    pod_selector=k8s.meta.v1.LabelSelectorArgs(
                        match_labels=selector_labels(server_labels(service))
                    ),
                    policy_types=["Ingress"],
                    ingress=[_ingress_from(ranges, spec.target_ports)],
                ),
                opts=child,
            ),
            k8s.networking.v1.NetworkPolicy(
                f"{name}-epp-ingress",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=epp_name(service), namespace=namespace, labels=labels
                ),
                spec=k8s.networking.v1.NetworkPolicySpecArgs(
                    pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=epp_selector(service)),
                    policy_types=["Ingress"],
                    ingress=[_ingress_from(ranges, [EXT_PROC_PORT, EPP_HEALTH_PORT])],
                ),
                opts=child,
            ),
            k8s.networking.v1.NetworkPolicy(
                f"{name}-epp-egress",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"{epp_name(service)}-egress", namespace=namespace, labels=labels
                ),
                spec=epp_egress_spec(service, spec.target_ports),
                opts=child,
            ),
        ]
        chart = k8s.helm.v4.Chart(
            f"{name}-epp",
            chart=EPP_CHART,
            version=EPP_VERSION,
            name=service,
            namespace=namespace,
            values=epp_values(
                service,
                leaders_only=spec.leaders_only,
                disaggregated=spec.disaggregated,
                target_ports=spec.target_ports,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=policies),
        )
        self._harden_epp(name, service, namespace, chart)
        gateway = k8s.apiextensions.CustomResource(
            f"{name}-gateway",
            api_version=GATEWAY_API,
            kind="Gateway",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=service, namespace=namespace, labels=labels),
            spec={
                "gatewayClassName": GATEWAY_CLASS,
                "listeners": [
                    {
                        "name": "http",
                        "port": LISTENER_PORT,
                        "protocol": "HTTP",
                        "allowedRoutes": {"namespaces": {"from": "Same"}},
                    }
                ],
            },
            opts=child,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-route",
            api_version=GATEWAY_API,
            kind="HTTPRoute",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=service, namespace=namespace, labels=labels),
            # No request timeout here: on GKE the pool's GCPBackendPolicy sets it (the chart's).
            spec={
                "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": service}],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                        "backendRefs": [{"group": INFERENCE_GROUP, "kind": "InferencePool", "name": service}],
                    }
                ],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway, chart]),
        )
        self.gateway_name = pulumi.Output.from_input(service)
        self.inference_pool_name = pulumi.Output.from_input(service)
        self.namespace = pulumi.Output.from_input(namespace)
        self.register_outputs(
            {
                "gatewayName": self.gateway_name,
                "inferencePoolName": self.inference_pool_name,
                "namespace": self.namespace,
            }
        )

    def _harden_epp(self, name: str, service: str, namespace: str, chart: k8s.helm.v4.Chart) -> None:
        """The chart's EPP Deployment, patched (server-side apply of these fields only): the image's
        non-root user, seccomp RuntimeDefault, no privilege escalation or capability, a read-only root
        filesystem with a small writable /tmp. The chart sets none of them and has no value for them."""
        container = k8s.core.v1.ContainerPatchArgs(
            name="epp",
            security_context=k8s.core.v1.SecurityContextPatchArgs(
                allow_privilege_escalation=False,
                read_only_root_filesystem=True,
                run_as_non_root=True,
                capabilities=k8s.core.v1.CapabilitiesPatchArgs(drop=["ALL"]),
                seccomp_profile=k8s.core.v1.SeccompProfilePatchArgs(type="RuntimeDefault"),
            ),
            volume_mounts=[k8s.core.v1.VolumeMountPatchArgs(name="tmp", mount_path="/tmp")],
        )
        k8s.apps.v1.DeploymentPatch(
            f"{name}-epp-hardening",
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=epp_name(service), namespace=namespace),
            spec=k8s.apps.v1.DeploymentSpecPatchArgs(
                template=k8s.core.v1.PodTemplateSpecPatchArgs(
                    spec=k8s.core.v1.PodSpecPatchArgs(
                        security_context=k8s.core.v1.PodSecurityContextPatchArgs(
                            run_as_non_root=True,
                            run_as_user=NONROOT_ID,
                            run_as_group=NONROOT_ID,
                            seccomp_profile=k8s.core.v1.SeccompProfilePatchArgs(type="RuntimeDefault"),
                        ),
                        containers=[container],
                        volumes=[
                            k8s.core.v1.VolumePatchArgs(
                                name="tmp",
                                empty_dir=k8s.core.v1.EmptyDirVolumeSourcePatchArgs(size_limit="64Mi"),
                            )
                        ],
                    )
                )
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[chart]),
        )
