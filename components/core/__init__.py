"""Shared by every domain: problems and messages, patterns, the pydantic bases, the GPU catalog,
Kubernetes helpers, images, the package name.
"""
