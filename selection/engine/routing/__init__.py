"""Deterministic routing of governed units (root, area, task, explicit) from declared inputs only.

Kept empty on purpose: engine/types.py imports routing.types, so this package must not import the
engine's types at package level.
"""
