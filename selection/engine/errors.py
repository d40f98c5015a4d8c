"""SelectionError: a selection request that cannot run, refused by the engine or by the service in front of it."""

from __future__ import annotations


class SelectionError(ValueError):
    """A selection request that cannot run (unknown project, no promoted frame, bad condition)."""
