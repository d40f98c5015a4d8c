"""StageTimings: where a selection's time went, for callers that ask (the bench); the engine's only clock.

A caller passes a recorder to select() (and to the services that wrap it); each stage adds its elapsed
perf_counter seconds under its TimedStage. Without a recorder nothing is timed, and what is timed
never reaches a bundle or a trace, so a timed run's digest is an untimed run's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from enum import StrEnum


class TimedStage(StrEnum):
    RETRIEVAL = "retrieval"  # the candidate pool: both queries, fusion, pulls (select)
    TRACE_RECORDS = "trace_records"  # one frozen CandidateRecord per candidate (select)
    EMBED = "embed"  # query and objective embeddings (selection.serving.selections.run_selection)
    SELECT = "select"  # the engine's select() as a whole (selection.serving.selections.run_selection)
    TRACE_WRITE = "trace_write"  # the durable trace rows (selection.serving.selections.run_selection)


class StageTimings:
    """Seconds per TimedStage, summed over every time a stage ran since the last clear()."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.seconds: dict[TimedStage, float] = {}
        self._clock = clock

    @contextmanager
    def stage(self, name: TimedStage) -> Iterator[None]:
        start = self._clock()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + self._clock() - start

    def ms(self, name: TimedStage) -> float:
        return self.seconds.get(name, 0.0) * 1e3

    def clear(self) -> None:
        self.seconds.clear()


def timed(timings: StageTimings | None, name: TimedStage) -> AbstractContextManager:
    """`with timed(timings, stage):` times the block into `timings`, or does nothing without one."""
    return nullcontext() if timings is None else timings.stage(name)
