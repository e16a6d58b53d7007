"""A disaggregated stack-file service seen as its roles, each a service of one workload (its replicas,
a Pod's or a replica's GPUs), so that the rules and sizing written for one workload (pool_rules.py,
sizing.py: what the pool offers a Pod, its capacity, a rollout's surge room) count the roles."""

from __future__ import annotations

from ..gpu.pool import GpuPool
from .model import ReplicasConfig, ServingConfig
from .roles import RoleLayout, layouts_of


def role_view(service: ServingConfig, layout: RoleLayout, *, whole: bool) -> ServingConfig:
    """The service as one role, `<name>-<role>`: its replicas, and a Pod's GPUs (or, `whole`, a
    replica's)."""
    return service.model_copy(
        update={
            "name": layout.workload_name(service.name),
            "gpus_per_replica": layout.gpus if whole else layout.gpus_per_pod,
            "replicas": ReplicasConfig(min=layout.replicas, max=layout.replicas),
            "disaggregation": None,
            "expert_parallel": None,
        }
    )


def capacity_views(service: ServingConfig, pool: GpuPool) -> list[ServingConfig]:
    """What the service asks of the pool: itself, or its roles' whole replicas."""
    if service.disaggregation is None:
        return [service]
    return [role_view(service, layout, whole=True) for layout in layouts_of(service, pool.gpus_per_node)]
