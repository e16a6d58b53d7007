"""Workloads on the GPUs: the samples, the batch queues, the NCCL all-reduce."""
