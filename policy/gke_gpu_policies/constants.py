"""Names the policies and the Pulumi program agree on.

Import-safe from the program (`from policy.gke_gpu_policies.constants import SHARING_TRUSTED_LABEL`):
this module imports nothing beyond the standard library.
"""

from __future__ import annotations

# Node label that marks a GPU node pool whose GPUs may be shared (time-sharing or MPS). Sharers of one
# GPU are not isolated from each other (GPU memory and faults are shared), so only pools that run one
# trusted tenant should share. Set it in a stack file:
#   gke-gpu:gpuPools:
#     - name: l4-shared
#       sharing: {strategy: TIME_SHARING, maxClientsPerGpu: 4}
#       labels: {gke-gpu/sharing-trusted: "true"}
SHARING_TRUSTED_LABEL = "gke-gpu/sharing-trusted"
SHARING_TRUSTED_VALUE = "true"

# The taint every GPU node carries, and the extended resource a GPU container asks for.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NO_SCHEDULE"  # GKE API / pulumi-gcp spelling
GPU_RESOURCE = "nvidia.com/gpu"

# The cluster label GkeCluster sets when it turns Shielded GKE Nodes off for bare-metal nodes (A4X
# Max): node-shielded-vm accepts `enableShieldedNodes: false` on such a cluster only.
BARE_METAL_LABEL = "gke-gpu-bare-metal-nodes"

# Resource types.
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"

# The label InferenceService puts on its Deployment and Pods (`app.kubernetes.io/component`): the
# serving rules judge any workload that carries it as a model server, whatever its image.
COMPONENT_LABEL = "app.kubernetes.io/component"
SERVER_COMPONENT = "inference-server"
