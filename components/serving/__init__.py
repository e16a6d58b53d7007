"""Serving models: vLLM on the GPU pools (the stack file's `gke-gpu:serving`, `InferenceService`)."""
