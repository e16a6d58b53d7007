"""The stack's serving layer (`gke-gpu:serving`): an InferenceService per entry, on its pool, as the
serving domain plans it (serving/plan.py); the once-per-cluster parts they need (the metrics adapter, the
LeaderWorkerSet controller, the Hyperdisk ML transfer class, the images' mirror), and each entry's load
test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi

from ..core import images
from ..gpu.pool import GpuPool
from ..serving.image_source import DEFAULT_REPOSITORY, describe_image, mirrored, registry_path
from ..serving.model import ServingConfig
from .declare import declare
from .settings import Settings

if TYPE_CHECKING:
    from ..serving.inference_service import InferenceService
    from ..workloads.model import WorkloadConfig


def serving(
    settings: Settings,
    cluster_name: str,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    *,
    network: list[pulumi.Resource] | None = None,
    node_service_account: pulumi.Input[str] | None = None,
    image_reader: pulumi.Input[str] | None = None,
) -> dict[str, Any]:
    """Declare each service (and its gateway; `network`: what a gateway waits for, the VPC the stack
    creates) as the serving domain plans it (serving/plan.py); return, per service, where it answers
    and how to try it (stack output `serving`). `node_service_account`: a Standard cluster's nodes'
    account, for the nodes GKE creates for Hyperdisk ML transfers. `image_reader`: the account every
    node pulls images as, which reads the serving images' mirror."""
    if not settings.serving:
        return {}
    # Imported here: a stack without model servers does not pay for their modules.
    from ..serving.cluster_needs import needs_metrics_adapter, needs_transfer_class
    from ..serving.inference_service import InferenceService
    from ..serving.lws_controller import LeaderWorkerSetController
    from ..serving.metrics_adapter import CustomMetricsAdapter
    from ..serving.plan import plan_service
    from ..serving.pool_rules import pool_surges

    pools = {p.name: p for p in settings.gpu_pools}
    registry = _image_mirror(settings, image_reader)
    vllm_image = mirrored(registry, images.VLLM) if registry else images.VLLM
    surging = {name for pool in pools.values() for name in pool_surges(pool, settings.serving)}
    plans = [
        plan_service(
            service,
            pools[service.pool],
            autopilot=settings.cluster.mode == "autopilot",
            surge=service.name in surging,
            project=settings.project or "",
            cluster_name=cluster_name,
            image=vllm_image,
        )
        for service in settings.serving
    ]
    if needs_metrics_adapter(settings.serving):
        adapter = declare(
            CustomMetricsAdapter,
            "custom-metrics",
            {"project": settings.project or "", "cluster_name": cluster_name},
            opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
            section="serving",
        )
        depends_on = [*depends_on, adapter]
    if needs_transfer_class(settings.serving):
        depends_on = [*depends_on, _transfer_class(provider, node_service_account)]
    lws: list[pulumi.Resource] = []
    if any(plan.spans_nodes for plan in plans):
        # One per cluster: a replica that spans nodes is a LeaderWorkerSet, which its webhooks admit.
        lws = [
            declare(
                LeaderWorkerSetController,
                "leader-worker-set",
                {},
                opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
                section="serving",
            )
        ]
    outputs: dict[str, Any] = {}
    for plan in plans:
        service, pool = plan.service, plan.pool
        component = declare(
            InferenceService,
            plan.resource_name,
            plan.args,
            opts=pulumi.ResourceOptions(
                providers={"kubernetes": provider},
                depends_on=[*depends_on, *(lws if plan.spans_nodes else [])],
            ),
            section="serving",
            section_checked=True,
        )
        outputs[service.name] = plan.summary(component.service_url)
        if service.gateway:
            from .program_gateway import gateway

            outputs[service.name]["gateway"] = gateway(
                settings, plan, provider, [component, *(network or [])]
            )
        load = next(
            (w for w in settings.workloads if w.name == "serving-load" and w.service == service.name), None
        )
        if load is not None:
            outputs[service.name]["loadTest"] = _load_test(load, service, pool, provider, component, registry)
        outputs[service.name]["image"] = describe_image(vllm_image, registry, pool.image_cache)
    return outputs


def _image_mirror(settings: Settings, image_reader: pulumi.Input[str] | None) -> str:
    """The serving images' mirror in the stack's region (a Docker Hub remote repository the nodes
    read), its registry path; `` where no node account is given (a program that reads images from
    Docker Hub itself)."""
    if image_reader is None or not settings.region:
        return ""
    from ..serving.image_mirror import ImageMirror

    declare(
        ImageMirror,
        "serving-images",
        {
            "project": settings.project or "",
            "region": settings.region,
            "node_service_account_email": image_reader,
        },
        section="serving",
    )
    return registry_path(settings.region, settings.project or "", DEFAULT_REPOSITORY)


def _transfer_class(
    provider: pulumi.ProviderResource, node_service_account: pulumi.Input[str] | None
) -> pulumi.Resource:
    """The cluster's one ComputeClass for the Volume Populator's transfer Jobs."""
    from ..serving.transfer_class import HyperdiskMlTransferClass, HyperdiskMlTransferClassArgs

    args: HyperdiskMlTransferClassArgs = {}
    if node_service_account is not None:
        args["node_service_account_email"] = node_service_account
    return declare(
        HyperdiskMlTransferClass,
        "weights-transfer",
        args,
        opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
        section="serving",
    )


def _load_test(
    load: WorkloadConfig,
    service: ServingConfig,
    pool: GpuPool,
    provider: pulumi.ProviderResource,
    component: InferenceService,
    registry: str,
) -> dict[str, Any]:
    from ..serving.load_test import ServingLoadTest
    from ..serving.plan import load_test_args, load_test_summary

    given = load.floors.model_dump(exclude_none=True) if load.floors else {}
    args = load_test_args(service, pool, given)
    if registry:
        args["image"] = mirrored(registry, images.PYTHON)
    test = declare(
        ServingLoadTest,
        f"serving-load-{service.name}",
        args,
        # After the server: the test's own wait then starts when the Deployment exists.
        opts=pulumi.ResourceOptions(providers={"kubernetes": provider}, depends_on=[component]),
        section="workloads",
    )
    return load_test_summary(service, pool, args, given, test.job_name)
