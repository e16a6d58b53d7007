"""GPU pools: the pool model and its rules, the node pool, the ComputeClass, node labels, the NVIDIA
device plugin.
"""
