"""The refusals every app raises: a write refused by the state it finds, or by what was sent."""

from __future__ import annotations


class GovernanceError(Exception):
    """A refused governance write; the message says why, in the user's words."""


class InputRefused(GovernanceError):
    """A refused write because of what was sent (an empty comment, ...): `field` names where."""

    def __init__(self, message: str, *, field: tuple[str, ...] = ()):
        self.field = tuple(field)
        super().__init__(message)
