"""The gke-gpu policy pack: `pulumi preview --policy-pack policy`.

The pack's own entry point is `policy/__main__.py` (run by the Pulumi CLI, never imported). This file
only makes `policy` a package, so that the repository's tests and tools import the rules as
`policy.gke_gpu_policies.rules`; inside the pack they are the top-level `gke_gpu_policies`.
"""
