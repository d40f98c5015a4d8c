"""A proposal's refusals: an invalid patch, a rebase that needs choices, a promotion refused."""

from __future__ import annotations

from authority.errors import GovernanceError
from authority.models import FrameVersion
from rules.frame_patch import FrameIssue, KeyConflict


class ProposalInvalid(GovernanceError):
    """The patch, or the frame it produces, breaks the frame format; `issues` name each field."""

    def __init__(self, issues: list[FrameIssue]):
        self.issues = list(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues))


class RebaseConflict(GovernanceError):
    """Keys the proposal changes that the current version also changed: the author must choose,
    per key, the proposal's value ("mine") or the current one ("theirs"); nothing was written."""

    def __init__(self, conflicts: list[KeyConflict], *, current: FrameVersion):
        self.conflicts = list(conflicts)
        self.current = current
        keys = ", ".join(c.key for c in self.conflicts)
        super().__init__(
            f"v{current.number} also changed {keys}: choose for each key whether the proposal's value "
            "or the current one stands"
        )


class PromotionRefused(GovernanceError):
    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("cannot promote: " + "; ".join(self.reasons))


class PromotionConflict(PromotionRefused):
    """Another promotion of the same project committed first; nothing was written."""
