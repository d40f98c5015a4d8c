"""A small valid corpus written into tmp_path; each test breaks one thing in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Line numbers matter: tests assert them. Keep these texts' layout stable.
CORPUS_YAML = """\
name: tiny
description: Two projects that share a word.
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: alpha
    name: Alpha
    frame:
      purpose: Check the reader.
      objectives: [Every rule is tested.]
      scope: [alpha]
      default_classes: [rule]
      class_pull: 2
      work_types:
        review: [rule, note]
        release: [note]
      open_loop_work_types: [release]
      gates:
        primary: must_include_recall
        min_improvement: 0.0
        limits:
          - {metric: precision, max_drop: 0.02}
          - {metric: leakage, max: 0.0}
    x-owner: someone
  - slug: beta
    name: Beta
    frame:
      scope: [beta]
x-source: {repository: example/tiny}
"""

TASKS_YAML = """\
tasks:
  - id: t1
    family: same-query
    project: alpha
    pair: p1
    query: Review the rules.
    standpoint: 2026-09-20T12:00:00Z
    budget_tokens: 100
    signals:
      - {id: s1, kind: user_message, content: Review the rules.}
      - {id: s2, kind: project_state, content: The rules changed.}
    frame:
      objective: Decide which rules stay.
      work_type: review
      constraints: [Be brief.]
      cites: {objective: [s1], work_type: [s1, s2]}
    misassigned_work_type: release
    ledger:
      a1: MUST
      a2: SHOULD
      b1: HARMFUL
    x-note: kept
"""

PROPOSALS_YAML = """\
proposals:
  - id: wider-pull
    project: alpha
    title: Widen the class pull
    rationale: Required evidence never reached the pool.
    patch:
      class_pull: 4
    x-from: v2
"""


def base_units() -> list[dict[str, Any]]:
    return [
        {
            "id": "a1",
            "project": "alpha",
            "class": "rule",
            "title": "First rule",
            "text": "Rules are tested against a baseline.",
            "created_at": "2026-09-01T10:00:00Z",
            "valid_from": "2026-09-01T10:00:00+02:00",
            "valid_to": None,
            "x-claim": "rule.one",
        },
        {
            "id": "a2",
            "project": "alpha",
            "class": "note",
            "text": "A note that restates the first rule.",
            "supersedes": ["a0"],
            "echo_of": "a1",
            "supports": ["a1"],
            "open_loop": {"status": "open", "kind": "todo"},
            "paths": ["cli/**/*.py"],
            "subject": "rules",
            "facet": "testing",
            "root": True,
        },
        {"id": "a0", "project": "alpha", "class": "rule", "text": "An older rule."},
        {
            "id": "b1",
            "project": "beta",
            "class": "note",
            "text": "Beta shares the word rule.",
            "refutes": ["a0"],
        },
    ]


@dataclass(frozen=True)
class Samples:
    """The valid corpus's texts; tests change one thing in a copy."""

    corpus: str = CORPUS_YAML
    tasks: str = TASKS_YAML
    proposals: str = PROPOSALS_YAML

    def units(self) -> list[dict[str, Any]]:
        return base_units()

    def texts(self) -> dict[str, str]:
        return {
            "corpus.yaml": self.corpus,
            "tasks.yaml": self.tasks,
            "proposals.yaml": self.proposals,
        }

    def with_unit(self, index: int, **changes: Any) -> list[dict[str, Any]]:
        """The units with one of them changed; a value of ... removes the key."""
        units = base_units()
        for key, value in changes.items():
            if value is ...:
                units[index].pop(key)
            else:
                units[index][key] = value
        return units


@pytest.fixture
def samples() -> Samples:
    return Samples()


CorpusFactory = Callable[..., Path]


@pytest.fixture
def make_corpus(tmp_path: Path) -> CorpusFactory:
    """Write a corpus: YAML texts (None leaves a file out), units as dicts or raw lines."""

    def make(
        *,
        corpus: str | None = CORPUS_YAML,
        units: list[dict[str, Any] | str] | None = None,
        tasks: str | None = TASKS_YAML,
        proposals: str | None = PROPOSALS_YAML,
    ) -> Path:
        directory = tmp_path / "corpus"
        directory.mkdir(exist_ok=True)
        if corpus is not None:
            (directory / "corpus.yaml").write_text(corpus, encoding="utf-8")
        rows = base_units() if units is None else units
        lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
        (directory / "units.jsonl").write_text(
            "".join(line + "\n" for line in lines), encoding="utf-8"
        )
        for name, text in (("tasks.yaml", tasks), ("proposals.yaml", proposals)):
            if text is not None:
                (directory / name).write_text(text, encoding="utf-8")
        return directory

    return make
