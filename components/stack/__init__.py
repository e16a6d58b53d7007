"""The stack layer: the stack file's loader, keys, shape and cross-section rules, the settings, and the
program (the composition root). Nothing in a domain package imports it.
"""
