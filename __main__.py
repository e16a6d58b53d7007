"""gke-gpu: a GPU-ready GKE platform. Validates the stack config, then declares every resource."""

import pulumi

from gke_gpu.stack.config import load_settings

settings = load_settings()  # every problem of the stack file, or its notes, before anything is declared
# The components, and with them the cloud SDKs, are loaded only for a valid stack file (a bad one
# fails in a second rather than after the SDKs' imports).
from gke_gpu.core.validation import stack_notes_reported  # noqa: E402
from gke_gpu.stack.program import build, check_components  # noqa: E402

checked = check_components(settings)  # every component's own check of its args, before any declaration
with stack_notes_reported():  # so the components do not repeat those notes
    outputs = build(settings, checked)  # each component gets its checked args: none is checked twice
for key, value in outputs.items():
    pulumi.export(key, value)
