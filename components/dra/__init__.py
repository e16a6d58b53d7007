"""NVIDIA's DRA driver and the claims workloads make on it: ComputeDomains (multi-node NVLink on
GB200/GB300 racks) and GPUs handed out through DRA instead of GKE's device plugin.
"""
