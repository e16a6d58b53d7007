"""What the fleet section (`gke-gpu:fleet`) asks of the manager (the stack's own cluster: it holds the
queues and runs no GPU job) and the notes it gives on its workers. The workers' own sections are checked
by a single-cluster stack's rules, keyed under each worker (stack/fleet_section.py); what spans the
manager and its workers is fleet/rules.py's."""

from __future__ import annotations

from collections.abc import Sequence

from ..cluster.model import ClusterConfig
from ..core.common import NAMESPACE, Problems
from ..gpu.pool import GpuPool
from ..serving.model import ServingConfig
from ..workloads.model import BatchConfig, WorkloadConfig
from .model import FleetWorkerConfig
from .plan import FleetPlan

FLEET_KEY = f"{NAMESPACE}:fleet"


def check_manager(
    cluster: ClusterConfig,
    pools: Sequence[GpuPool],
    batch: BatchConfig,
    problems: Problems,
    *,
    workloads: Sequence[WorkloadConfig],
    serving: Sequence[ServingConfig],
) -> None:
    """The manager holds the queues and runs no GPU job: its Kueue is the fleet's, and its workloads
    and model servers would have no GPU."""
    if cluster.mode == "existing":
        problems.add(
            f"{NAMESPACE}:cluster.mode",
            "existing is not allowed with gke-gpu:fleet; allowed: standard, autopilot",
        )
    if pools:
        problems.add(
            f"{NAMESPACE}:gpuPools",
            f"{len(pools)} pool(s) on the fleet's manager; it runs no GPU jobs: put GPU pools "
            "in gke-gpu:fleet.workers[].gpuPools",
        )
    if batch.kueue:
        problems.add(
            f"{NAMESPACE}:batch.kueue",
            "true is not allowed with gke-gpu:fleet: the fleet installs the manager's Kueue itself; teams "
            "go in gke-gpu:fleet.teams",
        )
    if workloads:
        problems.add(
            f"{NAMESPACE}:workloads",
            "not allowed on the fleet's manager (it has no GPUs); samples and all-reduce tests go in "
            "gke-gpu:fleet.workers[].workloads, jobs reach the workers through the teams' queues",
        )
    if serving:
        problems.add(
            f"{NAMESPACE}:serving",
            "not allowed on the fleet's manager (it has no GPUs) nor in a worker; serve from a "
            "single-cluster stack",
        )


def token_note(worker: FleetWorkerConfig, key: str) -> str | None:
    """A worker reached by token: the user creates and renews the token the program never holds."""
    if worker.access != "token":
        return None
    return (
        f"note: {key}.access: token: the manager reaches worker {worker.name} with a ServiceAccount "
        "token you create (short-lived: `kubectl create token --duration`) and store in the "
        f"manager's Secret kueue-system/multikueue-{worker.name}; the program holds none, so the "
        "worker stays inactive until the Secret exists, and again once the token expires "
        "(outputs fleet.workers[].access has the commands; docs/fleet.md)"
    )


def idle_worker_notes(plan: FleetPlan) -> list[str]:
    """A worker no team queue of the fleet dispatches to."""
    return [
        f"note: {FLEET_KEY}.workers[{worker.index}]: no team queue of the fleet dispatches to "
        f"worker {worker.name}: the manager sends it no job (its own queues still take jobs "
        "submitted there)"
        for worker in plan.workers
        if not plan.job_namespaces(worker.name)
    ]
