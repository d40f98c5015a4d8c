"""What governance shows of a promoted frame's health, supplied by the app above it.

Health readings judge gates, which is the backtest app's; governance sits below it and never
imports it. The backtest app registers a HealthSource at start-up (BacktestConfig.ready); the
project page asks it for its panel and the inbox for the projects whose frame fails a gate now.
With no source registered there is nothing to show.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class HealthAlert:
    """A project whose promoted frame fails a declared gate at its latest reading."""

    project_id: int
    project_slug: str
    frame_version: int
    since: datetime  # the reading that first failed, of this run of failing readings
    failing: tuple[str, ...]  # "precision max_drop", ...
    summary: str


class HealthSource(Protocol):
    def panel(self, *, project, user) -> Any:
        """What the project page shows (None: nothing to show); checks that `user` may read it."""

    def alerts(self, *, project_ids) -> list[HealthAlert]:
        """The projects among `project_ids` that fail a gate now (a fixed number of queries)."""


class _NoHealth:
    def panel(self, *, project, user) -> Any:
        return None

    def alerts(self, *, project_ids) -> list[HealthAlert]:
        return []


_source: HealthSource = _NoHealth()


def register_health_source(source: HealthSource) -> None:
    """Called once at start-up by the app that reads frame health."""
    global _source
    _source = source


def health_panel(*, project, user) -> Any:
    return _source.panel(project=project, user=user)


def health_alerts(*, project_ids) -> list[HealthAlert]:
    return _source.alerts(project_ids=project_ids)
