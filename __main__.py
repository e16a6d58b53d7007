"""gke-gpu: a GPU-ready GKE platform. Validates the stack config, then declares every resource."""

import pulumi

from gke_gpu.config import load_settings
from gke_gpu.program import build

outputs = build(load_settings())
for key, value in outputs.items():
    pulumi.export(key, value)
