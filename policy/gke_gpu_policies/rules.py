"""GPU guardrails: the policy pack's `POLICIES`, each a pulumi-policy object around a plain validator.

Every validator has the pulumi-policy signature `(args, report_violation)`: resource validators take
`ResourceValidationArgs`, stack validators `StackValidationArgs` (a list of `PolicyResource`). Tests
call them directly; `policy/__main__.py` serves `POLICIES`; `tools/check_policies.py` runs them over
an offline render. The validators live by domain: `pools` (GPU node pools), `capacity` (the stack's
GPU budget, production Spot), `nodes` (clusters and nodes), `workloads` (Kubernetes workloads that
ask for GPUs), `scale_out` (`SCALE_OUT_POLICIES`), `teams` (`TEAM_POLICIES`) and `serving`
(`SERVING_POLICIES`). The first four's policy names, validators and config schemas (and `PoolGpus`,
`pool_gpus`, `pod_spec_path`) stay importable from here.

Conventions:

* Props are camelCase wire names, as the engine sends them after the provider's `Check`, so a field
  the program left out carries the provider default there (pulumi-gcp: `deletionProtection` true,
  `enableSecureBoot` false, `enableIntegrityMonitoring` true, `enableShieldedNodes` true). The
  offline render has no `Check`; `base._PROVIDER_DEFAULTS` applies the same defaults so both agree.
* A value that is not known yet (preview) is never a violation: the check is skipped. A value that
  is known to be missing is judged (an autoscaling block without a maximum is a violation).
* Every message names the resource and ends with the policy name in brackets.
"""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    ResourceValidationPolicy,
    Severity,
    StackValidationPolicy,
)

from .capacity import (
    BUDGET_SCHEMA,
    GPU_BUDGET,
    PROD_NOT_ALL_SPOT,
    PROD_SPOT_SCHEMA,
    validate_gpu_budget,
    validate_prod_not_all_spot,
)
from .capacity import PoolGpus as PoolGpus
from .capacity import pool_gpus as pool_gpus
from .constants import GPU_RESOURCE, GPU_TAINT_EFFECT, GPU_TAINT_KEY, SHARING_TRUSTED_LABEL
from .dra import DRA_POLICIES
from .nodes import (
    NODE_SERVICE_ACCOUNT,
    NODE_SHIELDED,
    NODE_WORKLOAD_IDENTITY,
    PROD_DELETION_PROTECTION,
    PROD_DELETION_SCHEMA,
    validate_node_service_account,
    validate_node_shielded,
    validate_node_workload_identity,
    validate_prod_deletion_protection,
)
from .pools import (
    GPU_POOL_AUTOSCALING,
    GPU_POOL_TAINT,
    GPU_SHARING_TRUSTED,
    validate_gpu_pool_autoscaling,
    validate_gpu_pool_taint,
    validate_gpu_sharing_trusted,
)
from .scale_out import SCALE_OUT_POLICIES
from .security import SECURITY_POLICIES
from .serving import SERVING_POLICIES
from .teams import TEAM_POLICIES
from .workloads import (
    TOLERATION_SCHEMA,
    WORKLOAD_GPU_LIMITS,
    WORKLOAD_GPU_TOLERATION,
    validate_gpu_workload_limits,
    validate_gpu_workload_toleration,
)
from .workloads import pod_spec_path as pod_spec_path

PACK_NAME = "gke-gpu-guardrails"

POLICIES: list[Policy] = [
    ResourceValidationPolicy(
        name=GPU_POOL_TAINT,
        description=f"GPU node pools carry the {GPU_TAINT_KEY} taint with effect {GPU_TAINT_EFFECT}.",
        validate=validate_gpu_pool_taint,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=GPU_POOL_AUTOSCALING,
        description="GPU node pools autoscale with a maximum node count.",
        validate=validate_gpu_pool_autoscaling,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    StackValidationPolicy(
        name=GPU_BUDGET,
        description="The GPUs a stack's node pools can scale to (max nodes x GPUs/node) stay within budget.",
        validate=validate_gpu_budget,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=BUDGET_SCHEMA,
        severity=Severity.HIGH,
    ),
    StackValidationPolicy(
        name=PROD_NOT_ALL_SPOT,
        description="Production stacks keep at least one on-demand GPU node pool.",
        validate=validate_prod_not_all_spot,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PROD_SPOT_SCHEMA,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=PROD_DELETION_PROTECTION,
        description="Production GKE clusters have deletion protection on.",
        validate=validate_prod_deletion_protection,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PROD_DELETION_SCHEMA,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=NODE_SERVICE_ACCOUNT,
        description="GKE nodes run as a dedicated service account, not the Compute Engine default one.",
        validate=validate_node_service_account,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=NODE_WORKLOAD_IDENTITY,
        description="GKE nodes serve Workload Identity metadata (GKE_METADATA).",
        validate=validate_node_workload_identity,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=NODE_SHIELDED,
        description="GKE nodes are Shielded VMs with secure boot and integrity monitoring.",
        validate=validate_node_shielded,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=WORKLOAD_GPU_LIMITS,
        description=f"Containers that ask for {GPU_RESOURCE} set an integer limit, and requests equal to it.",
        validate=validate_gpu_workload_limits,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=WORKLOAD_GPU_TOLERATION,
        description=f"Workloads that ask for {GPU_RESOURCE} tolerate the {GPU_TAINT_KEY} taint.",
        validate=validate_gpu_workload_toleration,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=TOLERATION_SCHEMA,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=GPU_SHARING_TRUSTED,
        description=f"GPU sharing (time-sharing, MPS) only on pools labelled {SHARING_TRUSTED_LABEL}=true.",
        validate=validate_gpu_sharing_trusted,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    # DRA-GPU pools asked through claims, rack jobs through a ComputeDomain (dra.py).
    *DRA_POLICIES,
    # Tenancy: no team namespace at privileged, no privileged image by tag (security.py).
    *SECURITY_POLICIES,
    # GPUDirect pools in one zone, Kueue queues for GPU pools and JobSets (scale_out.py).
    *SCALE_OUT_POLICIES,
    *TEAM_POLICIES,
    # Model servers: GPUs, a tainted GPU pool, read-only weights (serving.py).
    *SERVING_POLICIES,
]
