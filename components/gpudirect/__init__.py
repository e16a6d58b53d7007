"""GPUDirect: the flavours (NIC layouts, images), the GPU NICs' networks, the node software, the Pod
parts.
"""
