"""What a stack's model servers ask of its cluster: the Cloud Storage FUSE CSI driver for weights
mounted from a bucket (a Hyperdisk ML volume needs none: the PD CSI driver and the Volume Populator are
on by default) and GKE's Gateway API for an Inference Gateway (cluster/plan.py ClusterFeatures); the
custom metrics adapter and the Hyperdisk ML transfer class, one each per cluster (stack/program_serving.py
declares them where these say)."""

from __future__ import annotations

from collections.abc import Sequence

from .model import ServingConfig
from .rules import weights_source


def needs_gcs_fuse(services: Sequence[ServingConfig]) -> bool:
    """A service mounts its weights from a bucket."""
    return any(weights_source(s.model) == "gcs" and s.weights.via == "cloudStorageFuse" for s in services)


def needs_gateway_api(services: Sequence[ServingConfig]) -> bool:
    """A service has an Inference Gateway."""
    return any(s.gateway for s in services)


def needs_metrics_adapter(services: Sequence[ServingConfig]) -> bool:
    """A service autoscales: its HorizontalPodAutoscaler reads vLLM's queue through the adapter."""
    return any(s.replicas.max > s.replicas.min for s in services)


def needs_transfer_class(services: Sequence[ServingConfig]) -> bool:
    """A service's weights come on a Hyperdisk ML volume, which GKE fills through a transfer
    StorageClass's Volume Populator."""
    return any(s.weights.via == "hyperdiskMl" for s in services)
