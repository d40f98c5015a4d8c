"""Test helpers: a minimal reader for corpus-format directories and small builders. No Django."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from selection.engine.types import (
    OpenLoop,
    ProjectFrame,
    SelectionRequest,
    Unit,
    WorkFrame,
    WorkSignal,
)

REPO = Path(__file__).resolve().parents[3]
BOOK = Path(__file__).resolve().parents[3].parent / "shared" / "benchmarks" / "book-ch10"
T0 = datetime.fromisoformat("2026-09-20T12:00:00+00:00")


def when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def unit_from_json(row: dict) -> Unit:
    loop = row.get("open_loop")
    return Unit(
        id=row["id"],
        project=row["project"],
        evidence_class=row["class"],
        text=row["text"],
        title=row.get("title", ""),
        created_at=when(row.get("created_at")),
        valid_from=when(row.get("valid_from")),
        valid_to=when(row.get("valid_to")),
        supersedes=tuple(row.get("supersedes", ())),
        echo_of=row.get("echo_of"),
        supports=tuple(row.get("supports", ())),
        refutes=tuple(row.get("refutes", ())),
        open_loop=OpenLoop(**loop) if loop else None,
    )


def frame_from_yaml(slug: str, frame: dict) -> ProjectFrame:
    return ProjectFrame(
        project=slug,
        version=1,
        purpose=frame.get("purpose", ""),
        objectives=tuple(frame.get("objectives", ())),
        constraints=tuple(frame.get("constraints", ())),
        scope=tuple(frame.get("scope", ())),
        default_classes=tuple(frame.get("default_classes", ())),
        class_pull=frame.get("class_pull", 3),
        work_types=tuple(sorted((k, tuple(v)) for k, v in (frame.get("work_types") or {}).items())),
        open_loop_work_types=tuple(frame.get("open_loop_work_types", ())),
    )


@dataclass
class Task:
    id: str
    pair: str | None
    project: str
    query: str
    standpoint: datetime
    budget: int
    work: WorkFrame
    ledger: dict[str, str]
    misassigned: str | None


@dataclass
class Corpus:
    units: list[Unit]
    frames: dict[str, ProjectFrame]
    tasks: list[Task]

    def request(self, task: Task, condition: str, **overrides) -> SelectionRequest:
        kwargs = dict(
            project_frame=self.frames[task.project],
            work_frame=task.work,
            query=task.query,
            budget_tokens=task.budget,
            condition=condition,
            ledger=task.ledger if condition == "CO" else None,
        )
        kwargs.update(overrides)
        return SelectionRequest(**kwargs)


def load_corpus(path: Path) -> Corpus:
    units = [
        unit_from_json(json.loads(line))
        for line in (path / "units.jsonl").read_text().splitlines()
        if line.strip()
    ]
    meta = yaml.safe_load((path / "corpus.yaml").read_text())
    frames = {p["slug"]: frame_from_yaml(p["slug"], p["frame"]) for p in meta["projects"]}
    tasks: list[Task] = []
    tasks_path = path / "tasks.yaml"
    if tasks_path.exists():
        for t in yaml.safe_load(tasks_path.read_text()).get("tasks", []):
            f = t["frame"]
            standpoint = when(str(t.get("standpoint") or meta.get("standpoint")))
            work = WorkFrame(
                objective=f.get("objective", ""),
                work_type=f.get("work_type"),
                constraints=tuple(f.get("constraints", ())),
                signals=tuple(
                    WorkSignal(s["id"], s["kind"], s["content"]) for s in t.get("signals", ())
                ),
                standpoint=standpoint,
                establishment="declared",
                cites=tuple(sorted((k, tuple(v)) for k, v in (f.get("cites") or {}).items())),
            )
            ledger: dict[str, str] = {}
            raw = t.get("ledger") or {}
            for key, value in raw.items():
                if isinstance(value, list):  # grouped by label
                    for uid in value:
                        ledger[uid] = key
                else:
                    ledger[key] = value
            tasks.append(
                Task(
                    t["id"],
                    t.get("pair"),
                    t["project"],
                    t["query"],
                    standpoint,
                    int(t.get("budget_tokens", 1500)),
                    work,
                    ledger,
                    t.get("misassigned_work_type"),
                )
            )
    return Corpus(units, frames, tasks)


# ---------------------------------------------------------------------------------------------
# A small hand-built corpus whose every behaviour is known in advance.
# ---------------------------------------------------------------------------------------------

from datetime import timedelta  # noqa: E402

import numpy as np  # noqa: E402


def days_ago(n: float) -> datetime:
    return T0 - timedelta(days=n)


def mk(
    uid: str, text: str, cls: str = "note", project: str = "alpha", age: float = 10, **kw
) -> Unit:
    kw.setdefault("created_at", days_ago(age))
    return Unit(id=uid, project=project, evidence_class=cls, text=text, **kw)


ALPHA = ProjectFrame(
    project="alpha",
    version=3,
    scope=("alpha",),
    default_classes=("result",),
    class_pull=2,
    work_types=(
        ("release", ("todo", "result")),
        ("review", ("rule", "decision", "result", "prose")),
    ),
    open_loop_work_types=("release",),
)


def mini_units() -> list[Unit]:
    """alpha: rule + two echoes, a superseded SQLite decision and its PostgreSQL successor, a result
    and its refutation, an open loop, prose; beta: a lexically perfect out-of-scope twin."""
    return [
        mk(
            "a-rule",
            "Every mechanism must beat the retrieval baseline at a matched budget.",
            "rule",
        ),
        mk(
            "a-echo1",
            "Restated: every mechanism must beat the retrieval baseline.",
            "note",
            echo_of="a-rule",
        ),
        mk(
            "a-echo2",
            "Again: a mechanism must beat the baseline before it is kept.",
            "note",
            echo_of="a-rule",
        ),
        mk(
            "a-sqlite",
            "The baseline store keeps memory units in SQLite tables.",
            "decision",
            age=30,
            title="SQLite",
            valid_to=days_ago(5),
        ),
        mk(
            "a-postgres",
            "Memory units now live in PostgreSQL with pgvector.",
            "decision",
            age=5,
            title="PostgreSQL",
            supersedes=("a-sqlite",),
        ),
        mk("a-result", "Baseline result: retrieval recall reached 0.77 on the fixture.", "result"),
        mk(
            "a-refute",
            "A rerun contradicts the baseline result; recall was 0.61.",
            "result",
            refutes=("a-result",),
        ),
        mk(
            "a-loop",
            "Still open: run the baseline on a real corpus before release.",
            "todo",
            open_loop=OpenLoop("open", "todo"),
        ),
        mk(
            "a-prose",
            "Chapter prose describing the baseline and the retrieval budget.",
            "prose",
            age=1,
        ),
        mk(
            "b-rule",
            "Every mechanism must beat the retrieval baseline at a matched budget!",
            "rule",
            project="beta",
        ),
    ]


def mini_work(
    work_type: str = "review",
    objective: str = "Decide whether the mechanism beats the baseline.",
    **kw,
) -> WorkFrame:
    kw.setdefault("standpoint", T0)
    return WorkFrame(objective=objective, work_type=work_type, **kw)


def mini_request(
    condition: str,
    query: str = "Does the mechanism beat the retrieval baseline?",
    budget: int = 2000,
    work: WorkFrame | None = None,
    frame: ProjectFrame = ALPHA,
    **kw,
) -> SelectionRequest:
    return SelectionRequest(
        project_frame=frame,
        work_frame=work or mini_work(),
        query=query,
        budget_tokens=budget,
        condition=condition,
        **kw,
    )


def hash_vectors(texts: list[str], dim: int = 64) -> np.ndarray:
    """A deterministic bag-of-words embedding for tests (never used outside them)."""
    import hashlib

    from selection.engine.index import tokenise

    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for tok in tokenise(text):
            h = int.from_bytes(hashlib.sha256(tok.encode()).digest()[:4], "big")
            out[i, h % dim] += 1.0
    return out


def crowd_units() -> list[Unit]:
    """Twelve rules that match "baseline retrieval" ahead of one gossip unit that matches only
    "baseline", plus fillers so that neither word is in half the corpus (positive idf)."""
    words = [
        "amber",
        "birch",
        "cedar",
        "delta",
        "ember",
        "fjord",
        "grove",
        "heath",
        "inlet",
        "jetty",
        "knoll",
        "larch",
    ]
    rules = [
        mk(f"a-r{i:02d}", f"baseline retrieval rule about {w}", "rule") for i, w in enumerate(words)
    ]
    fillers = [mk(f"a-f{i:02d}", f"unrelated filler text number {i}", "rule") for i in range(20)]
    return (
        rules + fillers + [mk("a-gossip", "someone mentioned the baseline once at lunch", "gossip")]
    )


CROWD_QUERY = "baseline retrieval"
