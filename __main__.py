"""gke-gpu: a GPU-ready GKE platform. Validates the stack config, then declares every resource."""

import pulumi

from components.config import load_settings
from components.program import build

outputs = build(load_settings())
for key, value in outputs.items():
    pulumi.export(key, value)
