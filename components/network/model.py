"""The network section: a VPC built for GKE, or an existing one (the stack file's `gke-gpu:network`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..core.model import (
    NETWORK_REF,
    SUBNETWORK_REF,
    Cidr,
    GceName,
    StackModel,
)


class ExistingNetworkConfig(StackModel):
    network: Annotated[str, Field(max_length=200, pattern=NETWORK_REF)]
    subnetwork: Annotated[str, Field(max_length=250, pattern=SUBNETWORK_REF)]
    pods_range_name: GceName
    services_range_name: GceName


class NetworkConfig(StackModel):
    subnet_cidr: Cidr = "10.10.0.0/20"
    pods_cidr: Cidr = "10.16.0.0/14"
    services_cidr: Cidr = "10.20.0.0/20"
    # VPC flow logs on the subnet, sampled: 0 turns them off.
    flow_log_sampling: float = Field(0.5, ge=0, le=1)
    existing: ExistingNetworkConfig | None = None
    # The range the GPUDirect NICs' subnets are carved from (gpudirect/flavors.py); resolved to
    # 192.168.0.0/16 when a pool has gpudirect: true.
    gpudirect_cidr: Cidr | None = None
