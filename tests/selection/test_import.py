"""corpus_import and corpus_export on the real PostgreSQL: all or nothing, a faithful round trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from authority.models import AuditEntry, FrameVersion, Promotion
from governance.models import Proposal
from selection.corpus import CorpusError, read_corpus
from selection.memory import embeddings, importing
from selection.memory.exporting import corpus_data, corpus_export
from selection.memory.importing import CorpusRefused, corpus_import
from selection.models import (
    Corpus,
    LedgerEntry,
    MemoryUnit,
    Project,
    Task,
    TaskSignal,
    UnitLink,
)

CORPUS_YAML = """\
name: lab
description: Two projects for the import tests.
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: lab-alpha
    name: Alpha
    frame:
      purpose: Check the importer.
      scope: [lab-alpha]
      default_classes: [rule]
      class_pull: 2
      work_types:
        review: [rule, note]
        release: [note, missing-class]
      open_loop_work_types: [release]
      gates:
        primary: must_include_recall
        min_improvement: 0.0
        limits:
          - {metric: precision, max_drop: 0.02, x-why: noise}
    x-owner: someone
  - slug: lab-beta
    name: Beta
    frame:
      scope: [lab-beta]
x-source: {repository: example/lab}
"""

UNITS = [
    {
        "id": "a1",
        "project": "lab-alpha",
        "class": "rule",
        "title": "First rule",
        "text": "Rules are tested against a baseline.",
        "created_at": "2026-09-01T10:00:00+02:00",
        "valid_from": "2026-09-01T10:00:00Z",
        "x-claim": "rule.one",
    },
    {
        "id": "a2",
        "project": "lab-alpha",
        "class": "note",
        "text": "A note that restates the first rule.",
        "supersedes": ["a0"],
        "echo_of": "a1",
        "supports": ["a1"],
        "open_loop": {"status": "open", "kind": "todo", "x-loop": "ol-1"},
        "paths": ["cli/**/*.py"],
        "subject": "rules",
        "facet": "testing",
        "root": True,
    },
    {
        "id": "a0",
        "project": "lab-alpha",
        "class": "rule",
        "text": "An older rule.",
        "valid_to": None,
    },
    {
        "id": "b1",
        "project": "lab-beta",
        "class": "note",
        "text": "Beta says rule too.",
        "refutes": ["a0"],
    },
]

TASKS_YAML = """\
tasks:
  - id: t1
    family: same-query
    project: lab-alpha
    pair: p1
    query: Review the rules.
    standpoint: 2026-09-20T12:00:00Z
    budget_tokens: 100
    signals:
      - {id: s1, kind: user_message, content: Review the rules., x-raw: 1}
      - {id: s2, kind: project_state, content: The rules changed.}
    frame:
      objective: Decide which rules stay.
      work_type: review
      constraints: [Be brief.]
      cites: {objective: [s1], work_type: [s1, s2], x-by: hand}
      x-origin: wf-1
    misassigned_work_type: release
    ledger:
      a1: MUST
      a2: SHOULD
      b1: HARMFUL
    x-note: kept
  - id: t2
    project: lab-beta
    query: What does beta say?
    budget_tokens: 50
x-generated-by: hand
"""

PROPOSALS_YAML = """\
proposals:
  - id: wider-pull
    project: lab-alpha
    title: Widen the class pull
    rationale: Required evidence never reached the pool.
    patch:
      class_pull: 4
    x-from: v2
  - id: prose-first
    project: lab-alpha
    title: Notes first in review
    patch:
      work_types:
        review: [note, rule]
"""

# every malformed case of the format, each leaving the database untouched
BREAKAGES = {
    "unknown unit key": ("units", lambda units: units[0].update(colour="red")),
    "importance": ("units", lambda units: units[0].update(importance=5)),
    "bad id": ("units", lambda units: units[2].update(id="A 0")),
    "missing link": ("units", lambda units: units[1].update(supports=["nowhere"])),
    "supersedes cycle": ("units", lambda units: units[2].update(supersedes=["a2"])),
    "echo cycle": ("units", lambda units: units[0].update(echo_of="a2")),
    "duplicate id": ("units", lambda units: units.append(dict(units[2]))),
    "naive time": ("units", lambda units: units[0].update(created_at="2026-09-01T10:00:00")),
    "garbage time": ("units", lambda units: units[0].update(created_at="last tuesday")),
    "undeclared project": ("units", lambda units: units[3].update(project="lab-gamma")),
    "bad open loop": (
        "units",
        lambda units: units[1].update(open_loop={"status": "ajar", "kind": "todo"}),
    ),
    "malformed json": ("units", lambda units: units.append('{"id": "z1",')),
    "ledger id missing": ("tasks", ("      b1: HARMFUL\n", "      b9: HARMFUL\n")),
    "unknown cite": ("tasks", ("cites: {objective: [s1]", "cites: {objective: [s9]")),
    "bad signal kind": ("tasks", ("kind: project_state", "kind: rumour")),
    "must over budget": ("tasks", ("budget_tokens: 100", "budget_tokens: 5")),
    "bad label": ("tasks", ("a2: SHOULD", "a2: NICE")),
    "unknown frame key": (
        "corpus",
        ("      class_pull: 2\n", "      class_pull: 2\n      mood: calm\n"),
    ),
    "unknown metric": ("corpus", ("{metric: precision,", "{metric: recall,")),
    "scope undeclared": ("corpus", ("scope: [lab-beta]", "scope: [lab-gamma]")),
    "patch not a mapping": ("proposals", ("    patch:\n      class_pull: 4\n", "    patch: [4]\n")),
    "proposal project": (
        "proposals",
        ("    project: lab-alpha\n    title: Notes", "    project: nope\n    title: Notes"),
    ),
}

ROW_MODELS = (
    Corpus,
    Project,
    MemoryUnit,
    UnitLink,
    Task,
    TaskSignal,
    LedgerEntry,
    FrameVersion,
    Promotion,
    Proposal,
    AuditEntry,
)


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in ROW_MODELS}


def write_corpus_dir(
    directory: Path,
    *,
    corpus: str = CORPUS_YAML,
    units: list | None = None,
    tasks: str | None = TASKS_YAML,
    proposals: str | None = PROPOSALS_YAML,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.yaml").write_text(corpus, encoding="utf-8")
    rows = json.loads(json.dumps(UNITS)) if units is None else units
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    (directory / "units.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    for name, text in (("tasks.yaml", tasks), ("proposals.yaml", proposals)):
        if text is not None:
            (directory / name).write_text(text, encoding="utf-8")
    return directory


@pytest.fixture
def embedding_batches(monkeypatch):
    """The real packaged model, with every batch it was asked to embed recorded."""
    batches: list[list[str]] = []
    real = embeddings.embed_texts

    def recording(texts, batch_size=64, progress=None):
        for start in range(0, len(texts), batch_size):
            batches.append(list(texts[start : start + batch_size]))
        return real(texts, batch_size=batch_size, progress=progress)

    monkeypatch.setattr(embeddings, "embed_texts", recording)
    return batches


@pytest.fixture
def source(tmp_path) -> Path:
    return write_corpus_dir(tmp_path / "lab")


# --- a valid corpus ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_import_writes_the_whole_corpus(source, embedding_batches, monkeypatch):
    monkeypatch.setattr(importing, "EMBED_BATCH", 3)
    steps: list[tuple[str, int, int]] = []

    corpus = corpus_import(source, progress=lambda *step: steps.append(step))

    assert (corpus.name, corpus.embedding_model) == ("lab", "all-MiniLM-L6-v2")
    assert corpus.extras["x-source"] == {"repository": "example/lab"}
    assert row_counts() == {
        "Corpus": 1,
        "Project": 2,
        "MemoryUnit": 4,
        "UnitLink": 4,  # a2 supersedes a0, echoes a1, supports a1; b1 refutes a0
        "Task": 2,
        "TaskSignal": 2,
        "LedgerEntry": 3,
        "FrameVersion": 4,  # v1 of each project, and one version per proposal
        "Promotion": 2,
        "Proposal": 2,
        "AuditEntry": 5,  # corpus, two frames, two proposals
    }
    # embeddings in batches of 3, with progress per batch; then the rows
    assert [len(batch) for batch in embedding_batches] == [3, 1]
    assert [step for step in steps if step[0] == "embedding"] == [
        ("embedding", 3, 4),
        ("embedding", 1, 4),
    ]
    assert sum(n for step, n, _ in steps if step == "writing") == 4 + 2 + 2

    a2 = MemoryUnit.objects.get(uid="a2")
    assert len(a2.embedding) == 384
    # the stored vector is the packaged model's own embedding of the unit's text
    again = embeddings.get_embedder().encode([a2.text])[0]
    assert float(np.dot(np.asarray(a2.embedding), again)) > 0.999
    assert (a2.open_loop_status, a2.open_loop_kind, a2.root, a2.tokens) == ("open", "todo", True, 9)
    assert a2.position == 2
    alpha = Project.objects.get(slug="lab-alpha")
    first = FrameVersion.objects.get(project=alpha, number=1)
    assert first.origin == "import" and first.snapshot["class_pull"] == 2
    assert Promotion.objects.get(project=alpha).frame_version == first

    proposal = Proposal.objects.get(uid="wider-pull")
    assert (proposal.base_version, proposal.frame_version.number) == (first, 2)
    assert proposal.frame_version.snapshot["class_pull"] == 4
    # the release work type names a class no unit in scope carries: kept as a warning
    assert any("missing-class" in warning for warning in proposal.warnings)
    assert Proposal.objects.get(uid="prose-first").frame_version.snapshot["work_types"][
        "review"
    ] == [
        "note",
        "rule",
    ]
    assert LedgerEntry.objects.get(task__uid="t1", unit__uid="b1").label == "HARMFUL"


# --- all or nothing ----------------------------------------------------------------------------


def broken_corpus(tmp_path: Path, breakage) -> Path:
    part, change = breakage
    texts = {"corpus": CORPUS_YAML, "tasks": TASKS_YAML, "proposals": PROPOSALS_YAML}
    units = json.loads(json.dumps(UNITS))
    if part == "units":
        change(units)
    else:
        old, new = change
        assert old in texts[part], old
        texts[part] = texts[part].replace(old, new, 1)
    return write_corpus_dir(
        tmp_path / "broken",
        corpus=texts["corpus"],
        units=units,
        tasks=texts["tasks"],
        proposals=texts["proposals"],
    )


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(BREAKAGES))
def test_a_malformed_corpus_leaves_no_rows(tmp_path, embedding_batches, case):
    path = broken_corpus(tmp_path, BREAKAGES[case])
    before = row_counts()

    with pytest.raises(CorpusError) as caught:
        corpus_import(path)

    assert row_counts() == before == dict.fromkeys(before, 0)
    assert embedding_batches == [], "nothing is embedded before the corpus is known to be valid"
    # each issue names its file
    assert all(issue.file in str(issue) for issue in caught.value.issues)


@pytest.mark.django_db
def test_a_failure_while_writing_leaves_no_rows(source, embedding_batches, monkeypatch):
    real = importing.audit_record

    def fail_at_the_end(**kwargs):
        if kwargs["action"] == "corpus.imported":
            raise RuntimeError("disk full")
        return real(**kwargs)

    monkeypatch.setattr(importing, "audit_record", fail_at_the_end)
    with pytest.raises(RuntimeError, match="disk full"):
        corpus_import(source)
    assert row_counts() == dict.fromkeys(row_counts(), 0)


@pytest.mark.django_db
def test_a_loaded_corpus_name_is_refused(source, embedding_batches, tmp_path):
    corpus_import(source)
    before = row_counts()

    with pytest.raises(CorpusRefused) as caught:
        corpus_import(source)

    assert row_counts() == before
    messages = [str(issue) for issue in caught.value.issues]
    assert messages[0].startswith(
        'corpus.yaml, field "name": a corpus named "lab" is already loaded'
    )
    assert any('project "lab-alpha" already exists in corpus "lab"' in m for m in messages)


@pytest.mark.django_db
def test_a_project_slug_in_use_is_refused_under_another_corpus_name(
    source, embedding_batches, tmp_path
):
    corpus_import(source)
    other = write_corpus_dir(
        tmp_path / "other", corpus=CORPUS_YAML.replace("name: lab\n", "name: lab-two\n")
    )
    before = row_counts()

    with pytest.raises(CorpusRefused) as caught:
        corpus_import(other)

    assert row_counts() == before
    unique = "project slugs are unique across an installation"
    assert [str(issue) for issue in caught.value.issues] == [
        'corpus.yaml projects[0].slug (line 5), field "slug": '
        f'project "lab-alpha" already exists in corpus "lab"; {unique}',
        'corpus.yaml projects[1].slug (line 22), field "slug": '
        f'project "lab-beta" already exists in corpus "lab"; {unique}',
    ]


@pytest.mark.django_db
def test_a_value_too_long_for_its_column_is_refused_before_writing(tmp_path, embedding_batches):
    units = json.loads(json.dumps(UNITS))
    units[0]["title"] = "t" * 301
    path = write_corpus_dir(tmp_path / "long", units=units)

    with pytest.raises(CorpusRefused) as caught:
        corpus_import(path)

    assert [str(issue) for issue in caught.value.issues] == [
        'units.jsonl line 1, field "title": 301 characters; at most 300 can be stored'
    ]
    assert row_counts() == dict.fromkeys(row_counts(), 0)


# --- export ------------------------------------------------------------------------------------


class Rollback(Exception):
    pass


@pytest.mark.django_db
def test_export_then_import_gives_the_same_corpus(source, embedding_batches, tmp_path):
    original = read_corpus(source)
    # import the original, export it, and undo the import, so the export can be imported in turn
    with pytest.raises(Rollback), transaction.atomic():
        corpus_import(source)
        assert corpus_data("lab") == original
        corpus_export("lab", tmp_path / "first")
        raise Rollback
    assert row_counts() == dict.fromkeys(row_counts(), 0)

    first = read_corpus(tmp_path / "first")
    assert first == original
    corpus_import(tmp_path / "first")
    corpus_export("lab", tmp_path / "second")
    assert read_corpus(tmp_path / "second") == original
    for name in ("corpus.yaml", "units.jsonl", "tasks.yaml", "proposals.yaml"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()
    # the "x-" keys with no column of their own came back too
    assert first.units[1].open_loop_extras == {"x-loop": "ol-1"}
    assert first.tasks[0].signals[0].extras == {"x-raw": 1}
    assert first.proposals[0].extras == {"x-from": "v2"}
    assert first.tasks_extras == {"x-generated-by": "hand"}


@pytest.mark.django_db
def test_export_of_current_frames_writes_the_promoted_version(source, embedding_batches, tmp_path):
    corpus_import(source)
    alpha = Project.objects.get(slug="lab-alpha")
    version = Proposal.objects.get(uid="wider-pull").frame_version
    Promotion.objects.create(project=alpha, frame_version=version, sequence=2)

    initial = read_corpus(corpus_export("lab", tmp_path / "initial"))
    current = read_corpus(corpus_export("lab", tmp_path / "current", frames="current"))

    assert initial.project("lab-alpha").project_frame.class_pull == 2
    assert current.project("lab-alpha").project_frame.class_pull == 4


@pytest.mark.django_db
def test_export_of_an_unknown_corpus(tmp_path):
    with pytest.raises(CorpusRefused, match='no corpus named "nope" is loaded'):
        corpus_export("nope", tmp_path / "out")


# --- the commands ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_import_corpus_command(source, embedding_batches, capsys):
    call_command("import_corpus", str(source))
    assert "imported lab: 2 projects, 4 units, 2 tasks" in capsys.readouterr().out


@pytest.mark.django_db
def test_import_corpus_command_lists_every_issue_and_fails(tmp_path, embedding_batches, capsys):
    units = json.loads(json.dumps(UNITS))
    units[0]["created_at"] = "soon"
    units[3]["project"] = "lab-gamma"
    path = write_corpus_dir(tmp_path / "bad", units=units)

    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_corpus", str(path))

    err = capsys.readouterr().err
    assert "corpus rejected: 2 issues" in err
    assert 'units.jsonl line 1, field "created_at": "soon" is not an ISO 8601 time' in err
    assert 'units.jsonl line 4, field "project": project "lab-gamma" is not declared' in err
    assert Corpus.objects.count() == 0


def test_import_corpus_command_exits_non_zero(tmp_path):
    """From a shell: the issue list on stderr and exit status 1 (no database needed to refuse)."""
    import subprocess
    import sys

    path = write_corpus_dir(tmp_path / "bad", units=['{"id": '])
    done = subprocess.run(
        [sys.executable, "manage.py", "import_corpus", str(path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "units.jsonl line 1: is not valid JSON" in done.stderr


@pytest.mark.django_db
def test_export_corpus_command(source, embedding_batches, tmp_path, capsys):
    corpus_import(source)
    call_command("export_corpus", "lab", str(tmp_path / "out"))
    assert read_corpus(tmp_path / "out") == read_corpus(source)
    with pytest.raises(CommandError, match="already holds"):
        call_command("export_corpus", "lab", str(tmp_path / "out"))
    call_command("export_corpus", "lab", str(tmp_path / "out"), "--overwrite")
