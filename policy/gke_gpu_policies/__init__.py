"""GPU guardrails for gke-gpu stacks, as pulumi-policy rules.

* `constants`: label and taint names shared with the Pulumi program (no pulumi-policy import, so
  `components/` may import it from the runtime virtualenv).
* `props`: reading resource properties that may be unknown during a preview.
* `rules`: the `POLICIES` list the pack serves (and its policies' names and validators, re-exported).
* `pools`, `capacity`, `nodes`, `workloads`: GPU node pools; the stack's GPU budget and production
  Spot; clusters' and nodes' security; workloads that ask for GPUs (in `POLICIES`). `base`: what they
  build on (the message format, config values, pulumi-gcp's defaults).
* `scale_out`: GPUDirect pools in one zone, Kueue queues for GPU pools and JobSets (in `POLICIES`).
* `teams`: GPU workloads in a team namespace are queued through its LocalQueues (in `POLICIES`).
* `servers`, `serving`: what a model server is; its GPUs, GPU pool and read-only weights (in `POLICIES`).
* `shared`: GPU containers, tolerations and GPU pools' taints, read by the rule modules and `serving`.
"""
