"""Every container image the program deploys, pinned to an exact tag, with why that tag.

Tags were checked against the upstream repositories on 2026-11-21 (see docs/configuration.md
"Images"). CUDA 12.x images are used on purpose: GKE's DEFAULT driver branch is older than R580,
which CUDA 13 needs, and CUDA 12 images run on any R525+ driver through CUDA minor-version compatibility.
"""

from __future__ import annotations

# NVIDIA CUDA base image: a shell and the CUDA runtime stubs; nvidia-smi comes from the driver
# (GKE mounts it at /usr/local/nvidia/bin, the NVIDIA container toolkit at /usr/bin).
CUDA_BASE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
# NVIDIA's vectorAdd sample: adds two vectors on the GPU, checks every element, exits non-zero on
# a wrong result or any CUDA error, prints "Test PASSED".
CUDA_VECTOR_ADD = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
# PyTorch runtime images. cu12.6 for everything up to Hopper; Blackwell (B200, RTX PRO 6000)
# needs sm_100/sm_120 kernels, first shipped in CUDA 12.8+ builds, so it gets the CUDA 13 build
# (and therefore needs an R580+ driver: use driverVersion LATEST on those pools).
PYTORCH = "pytorch/pytorch:2.14.1-cuda12.6-cudnn9-runtime"
PYTORCH_BLACKWELL = "pytorch/pytorch:2.14.1-cuda13.0-cudnn9-runtime"
# NVIDIA DCGM exporter (embedded host engine). Ubuntu variant: on GKE the driver libraries are
# mounted from the host and found through LD_LIBRARY_PATH, which the distroless variant lacks.
# Label rename ahead: dcgm-exporter main renames the `Hostname` label to `hostname` (commit
# d5e5f51, PR #655, 2026-05-12); this tag still emits `Hostname`. Bumping past it means changing
# DCGM_HOSTNAME_LABEL below, which every query keyed on the node name uses: the exporter alerts'
# `by (...)` clauses (components/monitoring/alert_rules.py) and the dashboard's DCGM group-by keys
# (components/monitoring/dashboard.py). GKE's managed DCGM ships its own exporter build: check its labels too.
DCGM_EXPORTER = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"
DCGM_HOSTNAME_LABEL = "Hostname"
# NVIDIA Kubernetes device plugin, for clusters that are not GKE (GKE ships its own).
DEVICE_PLUGIN = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"

# vLLM's OpenAI-compatible server (entrypoint `vllm serve`), 0.33.0 (2026-11-02; docs/serving-research.md
# 1a). A CUDA 13 build: it needs an R580+ driver, so a serving pool runs driverVersion LATEST. Pinned
# by tag: its digest could not be read from here (UNVERIFIED); resolve it with `crane digest`.
VLLM = "vllm/vllm-openai:v0.33.0"
# The serving load test's client (standard library only): Python's slim Debian image, multi-arch. Pinned
# by tag (python:3.13.9-slim-bookworm, the 3.13 line's current patch in public pins 2026-11); its digest
# could not be read from here (UNVERIFIED).
PYTHON = "python:3.13.9-slim-bookworm"

# llm-d-router's endpoint picker (EPP) for the Inference Gateway's InferencePool: the image its Helm chart
# llm-d-router-gateway v0.10.0 runs, written into the chart's values (serving/gateway.py) so it is pinned
# here too. Distroless, user 65532 (Dockerfile.epp at the tag). Its digest could not be read from here
# (UNVERIFIED).
EPP = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"
# llm-d-router's routing sidecar on a disaggregated service's decode Pods (serving/role_parts.py): the
# release component of llm-d v0.9.0 (its release notes: llm-d-router-disagg-sidecar v0.10.0, the
# endpoint picker's release). Distroless, user 65532 (Dockerfile.sidecar at llm-d/llm-d-router@v0.10.0).
# Its digest could not be read from here (UNVERIFIED).
DISAGG_SIDECAR = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"

# kube-state-metrics, for the MultiKueue fleet's custom resource state metrics on the manager
# (monitoring/kube_state_metrics.py): v2.20.0 (kubernetes/kube-state-metrics tag, commit 4ffeda2e,
# examples/standard/deployment.yaml runs this reference). Its digest could not be read from here
# (UNVERIFIED).
KUBE_STATE_METRICS = "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0"

BLACKWELL_ACCELERATORS = frozenset({"nvidia-b200", "nvidia-gb200", "nvidia-rtx-pro-6000"})


def pytorch_image(accelerator: str | None) -> str:
    return PYTORCH_BLACKWELL if accelerator in BLACKWELL_ACCELERATORS else PYTORCH
