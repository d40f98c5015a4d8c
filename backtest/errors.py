"""The refusals and failures of a backtest: a start or a review refused, a run that cannot go on."""

from __future__ import annotations

from authority.errors import GovernanceError, InputRefused


class BacktestRefused(GovernanceError):
    """A backtest that cannot start (no promoted version, no task, already promoted)."""


class BacktestError(RuntimeError):
    """A backtest that cannot go on: an unknown task or side, missing replays at the end."""


class ReviewRefused(GovernanceError):
    """A review that cannot be recorded: the backtest is not finished, already reviewed, ..."""


class RegressionsUnacknowledged(ReviewRefused):
    """An approval that has not acknowledged every task the backtest made worse.

    A field error, not a conflict of state: the API answers 422 naming `acknowledged` (the
    GovernanceError handler reads `status` and `fields`), the page ticks the boxes still to tick.
    """

    status = 422

    def __init__(self, tasks: list[str]):
        self.tasks = list(tasks)
        self.fields = [
            (("body", "acknowledged"), f"not acknowledged: {', '.join(self.tasks)}"),
        ]
        super().__init__(
            f"acknowledge each task that got worse before approving: {', '.join(self.tasks)}"
        )


class CommentRefused(InputRefused):
    """A comment that cannot be stored: empty, too long, or on a task its backtest did not replay."""
