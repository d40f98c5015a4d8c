"""Every bench selection goes through selection.serving.select_for_user, on a corpus the bench holds.

An Ask is one selection as the serving function takes it (project, query, objective, work type,
budget, condition, standpoint) with the vectors the generator made for its query and objective;
held() puts a generated corpus's frames, an index and the asks' vectors into a HeldCorpus; serve()
asks the serving function for one selection. Stage times come from the StageTimings the caller
passes (CpuTimings: wall clock and thread CPU time of every stage), never from a clock of the bench's
own around the call.

The serving function lives in the selection app and needs Django's app registry, so importing this
module sets Django up as manage.py does when nothing has yet (a part run alone, `python -m
bench.parts.<part>`, and the index restart's child process); nothing else of Django runs: no
database is read or written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from selection.engine.timings import StageTimings, TimedStage

if TYPE_CHECKING:
    from bench.workload import BenchTask
    from selection.engine.index import CorpusIndex
    from selection.engine.outputs import SelectionResult
    from selection.engine.types import EngineConfig, ProjectFrame

SETTINGS_MODULE = "config.settings"  # what manage.py sets


def django_ready() -> None:
    """Set Django up as manage.py does, unless it is: the serving function needs the app registry."""
    from django.apps import apps

    if not apps.ready:
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
        django.setup()


django_ready()

from selection.serving.serve import HeldCorpus, select_for_user  # noqa: E402 (needs the registry)


@dataclass(frozen=True)
class Ask:
    """One selection the bench asks for: the serving function's arguments and the generator's
    vectors of the query and the objective."""

    project: str
    query: str
    objective: str
    work_type: str | None
    budget_tokens: int
    condition: str
    standpoint: datetime | None
    query_vector: tuple[float, ...]
    objective_vector: tuple[float, ...] | None


def task_asks(tasks: Iterable[BenchTask], condition: str) -> list[Ask]:
    """The generator's tasks asked at `condition`."""
    return [
        Ask(project=t.project, query=t.query, objective=t.objective, work_type=t.work_type,
            budget_tokens=t.budget_tokens, condition=condition, standpoint=t.standpoint,
            query_vector=t.query_vector, objective_vector=t.objective_vector)
        for t in tasks
    ]


def held(
    frames: Mapping[str, ProjectFrame], index: CorpusIndex, asks: Iterable[Ask], *,
    config: EngineConfig | None = None,
) -> HeldCorpus:
    """The corpus the asks are served from: its frames, `index`, every ask's vectors by query (a
    query asked twice with other vectors is refused) and the engine configuration."""
    vectors: dict[str, tuple] = {}
    for ask in asks:
        pair = (ask.query_vector, ask.objective_vector)
        if vectors.setdefault(ask.query, pair) != pair:
            raise ValueError(f"the query {ask.query!r} is asked with two sets of vectors")
    return HeldCorpus(frames=dict(frames), index=index, vectors=vectors, config=config)


def serve(corpus: HeldCorpus, ask: Ask, timings: StageTimings | None = None) -> SelectionResult:
    """One selection through the serving function (source "bench"), timed into `timings`."""
    return select_for_user(
        user=None, project_slug=ask.project, query=ask.query, objective=ask.objective,
        work_type=ask.work_type, budget_tokens=ask.budget_tokens, condition=ask.condition,
        standpoint=ask.standpoint, source="bench", held=corpus, timings=timings,
    ).result


class CpuTimings(StageTimings):
    """StageTimings that also keep each stage's CPU time (`cpu_ms`; this thread's by default)."""

    def __init__(self, cpu_clock: Callable[[], float] = time.thread_time):
        super().__init__()
        self.cpu = StageTimings(clock=cpu_clock)

    @contextmanager
    def stage(self, name: TimedStage) -> Iterator[None]:
        with self.cpu.stage(name), super().stage(name):
            yield

    def cpu_ms(self, name: TimedStage) -> float:
        return self.cpu.ms(name)

    def clear(self) -> None:
        super().clear()
        self.cpu.clear()
