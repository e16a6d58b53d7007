"""gke-gpu: a GPU-ready GKE platform. Validates the stack config, then declares every resource."""

import pulumi

from gke_gpu.config import load_settings
from gke_gpu.program import build, check_components
from gke_gpu.validation import stack_notes_reported

settings = load_settings()  # every problem of the stack file, or its notes, before anything is declared
check_components(settings)  # and every component's own check of its args
with stack_notes_reported():  # so the components do not repeat those notes
    outputs = build(settings)
for key, value in outputs.items():
    pulumi.export(key, value)
