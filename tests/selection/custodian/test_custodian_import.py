"""The layout `init --extended` writes imports unchanged, exports byte for byte, and stays in step
with the repository: a re-import applies only the differences, as MemoryChange rows."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from selection.memory import store
from selection.memory.markdown_import import memory_export, memory_import
from selection.models import Corpus, MemoryChange, MemoryUnit, UnitStatus
from tests.selection.custodian.trees import entry, init_extended, subject_unit, write

SUBJECT = "MC-SUBJ-20260801-a1b2c3d4"


def command(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except CommandError as error:
        return error.returncode, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def tree_bytes(memory) -> dict[str, bytes]:
    return {p.relative_to(memory).as_posix(): p.read_bytes() for p in sorted(memory.rglob("*.md"))}


def test_the_init_extended_tree_imports_unchanged_and_exports_byte_for_byte(db, tmp_path):
    memory = init_extended(tmp_path / "repo")
    status, out, err = command("import_memory", str(tmp_path / "repo"), "--corpus", "mc", "--project", "mc")
    assert status == 0, err
    assert "imported mc (memory version 1)" in out and "Conflict status: CLEAR" in out
    uids = set(MemoryUnit.objects.values_list("uid", flat=True))
    # the peer's plain sections are units; subjects.md and the READMEs are kept, never units
    assert {"brief", "constraints", "decisions.unit-1", "do-not-use.unit-1", "changelog.unit-1"} <= uids
    decision = MemoryUnit.objects.get(uid="decisions.unit-1")
    assert (
        decision.title == "2026-10-01 - Use MemoryCustodian" and decision.extras["x-mc"]["ref"] == "decisions.md#unit-1"
    )

    memory_export("mc", tmp_path / "out")
    assert tree_bytes(tmp_path / "out" / "docs" / "memory") == tree_bytes(memory)


def test_inbox_candidates_are_stored_as_candidates_and_never_selected(db, tmp_path):
    memory = init_extended(tmp_path / "repo")
    write(
        memory,
        "inbox.md",
        "# Memory Inbox\n\nEntries are newest first.\n\n"
        "## MC-INBOX-20260728-d92a7e10 — Possible storage constraint\n\nStatus: candidate\n"
        "Candidate-Type: constraint\nScope: area:storage\nEvidence:\n- agent-observed\n\n"
        "Statement:\nThe code appears to assume JSON-only persistence.\n",
    )
    imported = memory_import(tmp_path / "repo", corpus="mc", project="mc")
    row = MemoryUnit.objects.get(uid="mc-inbox-20260728-d92a7e10")
    assert row.status == UnitStatus.CANDIDATE and row.extras["x-mc"]["id"] == "MC-INBOX-20260728-d92a7e10"
    created = MemoryChange.objects.get(unit=row)
    assert (created.kind, created.state["status"]) == ("created", "candidate")
    assert "mc-inbox-20260728-d92a7e10" not in {u.id for u in store.corpus_index(imported.corpus.pk).units}
    assert imported.corpus.projects.get().slug == "mc"


def test_a_reimport_applies_only_the_differences_to_the_same_corpus(db, tmp_path):
    repo = tmp_path / "repo"
    memory = init_extended(repo)
    write(memory, "subjects.md", "# Subject Registry\n\n" + subject_unit(SUBJECT, "Storage policy", "feature:storage"))
    first = "MC-CON-20260801-11111111"
    constraints = "# Constraints\n\n" + entry(first, "First", "Constraint", "First.", subject=SUBJECT, facet="behavior")
    write(memory, "constraints.md", constraints)
    v1 = memory_import(repo, corpus="mc", project="mc")
    brief_row = MemoryUnit.objects.get(uid="brief")
    before = Corpus.objects.get(pk=v1.corpus.pk).sequence

    second = "MC-CON-20260802-22222222"
    write(
        memory,
        "constraints.md",
        "# Constraints\n\n"
        + entry(
            first,
            "First",
            "Constraint",
            "First.",
            subject=SUBJECT,
            facet="behavior",
            status="superseded",
            extra=f"Superseded-By: {second}",
        )
        + "\n"
        + entry(second, "Second", "Constraint", "Second.", subject=SUBJECT, facet="behavior"),
    )
    (memory / "changelog.md").unlink()
    status, out, err = command("import_memory", str(repo), "--corpus", "mc", "--project", "mc")
    assert status == 0, err
    assert "memory version 2" in out and "+ mc-con-20260802-22222222" in out
    assert (
        "~ mc-con-20260801-11111111" in out
        and "- changelog.unit-1" in out
        and "mc-con-20260802-22222222 supersedes mc-con-20260801-11111111" in out
    )

    corpus = Corpus.objects.get(pk=v1.corpus.pk)  # the same corpus, not a new one
    assert Corpus.objects.count() == 1 and corpus.revision == v1.corpus.revision + 1
    assert MemoryUnit.objects.get(uid="brief").sequence == brief_row.sequence  # unchanged units untouched
    changes = list(MemoryChange.objects.filter(corpus=corpus, sequence__gt=before).values_list("unit__uid", "kind"))
    assert changes == [
        ("mc-con-20260802-22222222", "created"),
        ("mc-con-20260801-11111111", "changed"),  # now superseded
        ("changelog.unit-1", "changed"),  # removed: its validity closed
    ]
    assert MemoryUnit.objects.get(uid="changelog.unit-1").valid_to is not None  # left the repository

    status, out, _err = command("import_memory", str(repo), "--corpus", "mc", "--project", "mc")
    assert (
        status == 0
        and "memory version 2" in out
        and MemoryChange.objects.filter(corpus=corpus).count() == len(changes) + before
    )


def test_check_writes_nothing_and_exits_non_zero_on_invalid(db, tmp_path):
    repo = tmp_path / "repo"
    memory = init_extended(repo)
    status, out, _err = command("import_memory", str(repo), "--corpus", "mc", "--project", "mc", "--check")
    assert status == 0 and "an import creates corpus mc" in out and not MemoryUnit.objects.exists()

    text = (memory / "manifest.md").read_text(encoding="utf-8")
    write(memory, "manifest.md", text.replace("- protocol_version: 0.8", "- protocol_version: 0.8.0"))
    status, _out, err = command("import_memory", str(repo), "--corpus", "mc", "--project", "mc", "--check")
    assert status == 2 and "must use the canonical value 0.8" in err

    write(memory, "manifest.md", text)
    write(memory, "subjects.md", "# Subject Registry\n\n" + subject_unit(SUBJECT, "Storage policy"))
    write(
        memory,
        "constraints.md",
        "# Constraints\n\n"
        + entry("MC-CON-20260801-11111111", "First", "Constraint", "First.", subject=SUBJECT, facet="behavior")
        + "\n"
        + entry("MC-CON-20260801-22222222", "Second", "Constraint", "Second.", subject=SUBJECT, facet="unknown-facet"),
    )
    status, out, _err = command("import_memory", str(repo), "--corpus", "mc", "--project", "mc", "--check")
    assert status == 1 and "MC-CONFLICT-007 INVALID: Invalid Facet 'unknown-facet'." in out
    assert not MemoryUnit.objects.exists()


@pytest.mark.parametrize("strict_exit", [1])
def test_audit_memory_conflicts_prints_the_peers_findings_and_exit_code(db, tmp_path, strict_exit):
    repo = tmp_path / "repo"
    memory = init_extended(repo)
    status, out, _err = command("audit_memory", str(repo), "--conflicts")
    assert (status, out.splitlines()[0]) == (0, "Conflict status: CLEAR")
    write(
        memory,
        "subjects.md",
        "# Subject Registry\n\n" + subject_unit(SUBJECT, "Storage policy", "feature:storage-policy"),
    )
    write(
        memory,
        "constraints.md",
        "# Constraints\n\n"
        + entry("MC-CON-20260801-11111111", "First", "Constraint", "First.", subject=SUBJECT, facet="behavior")
        + "\n"
        + entry("MC-CON-20260801-22222222", "Second", "Constraint", "Second.", subject=SUBJECT, facet="behavior"),
    )
    status, out, _err = command("audit_memory", str(repo), "--conflicts")
    assert status == strict_exit and "Conflict status: CONFLICT" in out
    assert (
        "- MC-CONFLICT-001 CONFLICT: Multiple active owners for one structural identity. "
        "[Subject: mc-subj-20260801-a1b2c3d4; Facet: behavior; Scope: project] "
        "Entries: MC-CON-20260801-11111111, MC-CON-20260801-22222222."
    ) in out


def test_a_seeded_tree_round_trips_byte_for_byte_through_the_reader_and_the_export(tmp_path):
    """Pure: the reader's layout and units written back give every file's bytes."""
    from selection.corpus.custodian.export import layout_files
    from selection.corpus.memory_markdown import read_memory

    memory = init_extended(tmp_path)
    write(memory, "subjects.md", "# Subject Registry\n\n" + subject_unit(SUBJECT, "Storage policy", "feature:storage"))
    write(
        memory,
        "constraints.md",
        "# Constraints\r\n\r\nEntries are newest first.\r\n\r\n"
        + entry("MC-CON-20260801-11111111", "First", "Constraint", "First.", subject=SUBJECT, facet="behavior").replace(
            "\n", "\r\n"
        ),
    )
    write(
        memory,
        "decisions.md",
        "# Decisions\n\n## MC-DEC-20260802-22222222 — Fenced body\n\nStatus: active\nScope: project\n"
        f"Subject: {SUBJECT}\nFacet: architecture\nEvidence:\n- user-confirmed\n\nDecision:\n```text\n"
        "Status: not a field inside the fence\n## not a heading\n```\n\n<!-- a comment -->\n",
    )
    write(memory, "archive/decisions-2026-07-12.md", "# Archive\n\n## 2026-07-12 - Old decision\nDecision:\nOld.\n")
    write(memory, "do-not-use.md", "")  # emptied by a hard forget
    write(memory, "notes.md", "# Notes the manifest does not name\n")
    read = read_memory(tmp_path, project="p")
    fenced = next(u for u in read.units if u["id"] == "mc-dec-20260802-22222222")
    assert fenced["x-mc"]["body_fences"] == ["text"] and "not a field inside the fence" in fenced["text"]
    assert "archive/decisions-2026-07-12" in read.frame["explicit_only"]
    assert any("do-not-use.md holds no memory" in n for n in read.notes)
    assert any("notes.md is not named by the manifest" in n for n in read.notes)
    units = {u["id"]: {"title": u["title"], "text": u["text"], "extras": {"x-mc": u["x-mc"]}} for u in read.units}
    files = layout_files(read.layout, units)
    assert {path: text.encode("utf-8") for path, text in files.items()} == tree_bytes(memory)


def test_an_erased_unit_stays_erased_through_a_reimport_and_exports_as_its_mark(db, tmp_path, django_user_model):
    from authority.models import RoleGrant
    from selection.memory.erasure import unit_erase

    repo = tmp_path / "repo"
    init_extended(repo)
    imported = memory_import(repo, corpus="mc", project="mc")
    lead = django_user_model.objects.create_user("lead")
    RoleGrant.objects.create(user=lead, project=imported.corpus.projects.get(), role="lead")
    unit_erase(unit=MemoryUnit.objects.get(uid="brief"), lead=lead, reason="asked to")
    erased = MemoryUnit.objects.get(uid="brief").text

    again = memory_import(repo, corpus="mc", project="mc")
    assert (again.added, again.removed, again.changed) == ((), (), ())
    assert MemoryUnit.objects.get(uid="brief").text == erased
    memory_export("mc", tmp_path / "out")
    assert erased in (tmp_path / "out" / "docs" / "memory" / "brief.md").read_text(encoding="utf-8")


def test_a_reimport_keeps_text_that_is_no_unit_in_step_with_the_repository(db, tmp_path):
    repo = tmp_path / "repo"
    memory = init_extended(repo)
    memory_import(repo, corpus="mc", project="mc")
    readme = memory / "rules" / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    again = memory_import(repo, corpus="mc", project="mc")
    assert (again.added, again.removed, again.changed, again.version) == ((), (), (), 2)
    memory_export("mc", tmp_path / "out")
    assert tree_bytes(tmp_path / "out" / "docs" / "memory") == tree_bytes(memory)
