"""The generator's workload: tasks written from a corpus's units, each a replayable request with its
vectors and the units it was written from (its hidden ledger)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np

from selection.engine.types import ProjectFrame, Unit


class TaskSource(Protocol):
    """What tasks are written from: a generated corpus's units and vectors, each unit's topic and
    project, the projects' slugs and frames, the topics' centres, the shared direction, the standpoint."""

    units: list[Unit]
    vectors: np.ndarray
    topics: np.ndarray
    unit_projects: np.ndarray
    slugs: list[str]
    frames: dict[str, ProjectFrame]
    centres: np.ndarray
    shared: np.ndarray
    standpoint: datetime

DIMENSION = 384  # all-MiniLM-L6-v2


def unit_directions(rng: np.random.Generator, count: int) -> np.ndarray:
    out = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


@dataclass(frozen=True)
class BenchTask:
    """One replayable request: the frame fields a task declares, its vectors, and what it needs."""

    id: str
    project: str
    query: str
    objective: str
    work_type: str
    budget_tokens: int
    standpoint: datetime
    query_vector: tuple[float, ...]
    objective_vector: tuple[float, ...]
    must: tuple[str, ...]  # the units the query was written from: the task's hidden ledger


def written_from(rng: np.random.Generator, units: list[Unit], rows) -> str:
    """A query written from the units at `rows`: four of each one's words, in order, ten in all."""
    words: list[str] = []
    for pos in rows:
        text_words = units[int(pos)].text.split(" ")
        picks = rng.choice(len(text_words), size=min(4, len(text_words)), replace=False)
        words.extend(text_words[int(k)] for k in np.sort(picks))
    return " ".join(["how", "does"] + words[:10])


def corpus_tasks(
    rng: np.random.Generator,
    count: int,
    corpus: TaskSource,
    *,
    only_project: int | None = None,
    prefix: str = "t",
) -> list[BenchTask]:
    """Each task is written from three current units of one topic of its project."""
    units, vectors, topic, project = corpus.units, corpus.vectors, corpus.topics, corpus.unit_projects
    slugs, frames, centres, shared = corpus.slugs, corpus.frames, corpus.centres, corpus.shared
    standpoint = corpus.standpoint
    out: list[BenchTask] = []
    current = np.asarray([u.valid_to is None for u in units])
    anchors = np.flatnonzero(project == only_project) if only_project is not None else None
    for t in range(count):
        if anchors is not None:
            anchor = int(anchors[int(rng.integers(0, anchors.size))])
        else:
            anchor = int(rng.integers(0, len(units)))
        p, tp = int(project[anchor]), int(topic[anchor])
        same = np.flatnonzero((topic == tp) & (project == p) & current)
        if same.size == 0:
            same = np.asarray([anchor])
        must = np.sort(rng.choice(same, size=min(3, same.size), replace=False))
        query = written_from(rng, units, must)
        objective_words = units[int(must[0])].text.split(" ")
        objective = "review " + " ".join(objective_words[2:9])
        frame = frames[slugs[p]]
        work_type = frame.work_types[int(rng.integers(0, len(frame.work_types)))][0]
        qv = vectors[must].mean(axis=0) + 0.25 * unit_directions(rng, 1)[0]
        ov = centres[tp] + 0.45 * shared + 0.6 * unit_directions(rng, 1)[0]
        qv /= np.linalg.norm(qv)
        ov /= np.linalg.norm(ov)
        out.append(
            BenchTask(
                id=f"{prefix}{t:04d}",
                project=slugs[p],
                query=query,
                objective=objective,
                work_type=work_type,
                budget_tokens=1500,
                standpoint=standpoint,
                query_vector=tuple(float(x) for x in qv),
                objective_vector=tuple(float(x) for x in ov),
                must=tuple(units[int(i)].id for i in must),
            )
        )
    return out
