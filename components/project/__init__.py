"""What the GCP project must offer before `pulumi up` can succeed: the Google APIs a stack's resources
need, the deploying identity's least predefined roles (for `pulumi up`, and read-only for `pulumi
preview`), and the GPU quota per region and quota metric. Computed from what a render declares
(`preflight.py`), from tables that name their sources (`apis.py`, `permissions.py`, `roles.py`,
`quotas.py`; docs/preflight.md)."""
