"""The peer's entry-grammar and conflict cases (tests/test_protocol_07.py and
tests/test_protocol_07_release_gaps.py of waittim/MemoryCustodian; two from its Protocol 0.7
audit tests and one from tests/test_protocol_08.py, marked), over trees built here.

`audit_memory DIR --conflicts` is the peer's `check --conflicts`: its status line, its finding
codes, its exit status (1 on CONFLICT or INVALID).
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from selection.corpus.custodian.conflicts import analyze_conflicts
from selection.corpus.memory_markdown import read_memory
from tests.selection.custodian.trees import entry, init_extended, subject_unit, write

SUBJECT = "MC-SUBJ-20260801-a1b2c3d4"


@pytest.fixture
def memory(tmp_path):
    return init_extended(tmp_path)


def audit(root, *areas) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("audit_memory", str(root), "--conflicts", *(f"--area={a}" for a in areas), stdout=out)
    except CommandError as error:
        return error.returncode, out.getvalue()
    return 0, out.getvalue()


def registry(memory, *units: str) -> None:
    write(memory, "subjects.md", "# Subject Registry\n\n" + "\n".join(units))


def two_owners(memory, *, second_facet="behavior", second_scope="project", extra="") -> None:
    write(
        memory,
        "constraints.md",
        "# Constraints\n\n"
        + entry("MC-CON-20260801-11111111", "First", "Constraint", "First.", subject=SUBJECT, facet="behavior")
        + "\n"
        + entry(
            "MC-CON-20260801-22222222",
            "Second",
            "Constraint",
            "Second.",
            subject=SUBJECT,
            facet=second_facet,
            scope=second_scope,
            extra=extra,
        ),
    )


def test_ports_conflict_check_and_strict_read_block_duplicate_owner(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Storage policy", "feature:storage-policy", ("storage policy",)))
    two_owners(memory)
    status, out = audit(tmp_path)
    assert status == 1 and "Conflict status: CONFLICT" in out and "MC-CONFLICT-001" in out


def test_contract_conflict_identity_is_casefolded(memory, tmp_path):
    # the peer's identity: Scope + Subject ID + Facet, each casefolded
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    two_owners(memory)
    text = (memory / "constraints.md").read_text(encoding="utf-8")
    write(
        memory,
        "constraints.md",
        text.replace(
            f"Subject: {SUBJECT}\nFacet: behavior\nEvidence:\n- user-confirmed\n\nConstraint:\nSecond.",
            f"Subject: {SUBJECT.upper()}\nFacet: Behavior\nEvidence:\n- user-confirmed\n\nConstraint:\nSecond.",
        ),
    )
    status, out = audit(tmp_path)
    assert status == 1 and "MC-CONFLICT-001 CONFLICT" in out


def test_ports_valid_and_invalid_reconciliation_records_are_independent(memory, tmp_path):
    subject = "MC-SUBJ-20260801-aaaaaaaa"
    registry(memory, subject_unit(subject, "Reconciliation subject"))
    write(
        memory,
        "decisions.md",
        "# Decisions\n\n"
        + entry("MC-DEC-20260801-11111111", "One", "Decision", "One.", subject=subject, facet="behavior")
        + "\n"
        + entry("MC-DEC-20260801-22222222", "Two", "Decision", "Two.", subject=subject, facet="adoption-policy"),
    )
    valid = (
        "# Reconciliations\n\n## MC-REC-20260801-aaaaaaaa — Independent entries\n\n"
        "Status: active\nResolution: distinct\nEntries:\n- MC-DEC-20260801-11111111\n- MC-DEC-20260801-22222222\n"
        "Evidence:\n- user-confirmed\n"
    )
    write(memory, "reconciliations.md", valid)
    status, out = audit(tmp_path)
    assert status == 0 and "Conflict status: CLEAR" in out
    write(
        memory,
        "reconciliations.md",
        valid + valid.replace("aaaaaaaa", "bbbbbbbb").replace("# Reconciliations\n\n", "\n"),
    )
    status, out = audit(tmp_path)
    assert status == 1 and "MC-CONFLICT-008 INVALID" in out


def test_ports_subject_merge_previews_downstream_owner_blocker(memory, tmp_path):
    # two owners of one Facet under two Subjects: no structural conflict before a merge
    source, target = "MC-SUBJ-20260801-11111111", "MC-SUBJ-20260801-22222222"
    registry(memory, subject_unit(source, "Source"), subject_unit(target, "Target"))
    write(
        memory,
        "constraints.md",
        "# Constraints\n\n"
        + entry("MC-CON-20260801-11111111", "Source owner", "Constraint", "Source.", subject=source, facet="behavior")
        + "\n"
        + entry("MC-CON-20260801-22222222", "Target owner", "Constraint", "Target.", subject=target, facet="behavior"),
    )
    assert audit(tmp_path) == (0, "Conflict status: CLEAR\n")


def test_ports_subject_merge_validates_entries_and_binds_registry_and_entry_text(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Source subject"))
    write(
        memory,
        "decisions.md",
        "# Decisions\n\n"
        + entry(
            "MC-DEC-20260808-11111111",
            "Invalid source entry",
            "Decision",
            "Body.",
            subject=SUBJECT,
            facet="invalid-facet",
        ),
    )
    status, out = audit(tmp_path)
    assert status == 1 and "MC-CONFLICT-007 INVALID: Invalid Facet 'invalid-facet'." in out


def test_ports_list_uses_stable_references_for_legacy_units(memory, tmp_path):
    write(memory, "constraints.md", "# Constraints\n\n- Keep the CLI dependency-free.\n")
    unit = next(u for u in read_memory(tmp_path, project="p").units if u["x-mc"]["file"] == "constraints.md")
    assert unit["x-mc"]["ref"] == "constraints.md#unit-1" and not unit["id"].startswith("mc-con-")


def test_ports_id_list_show_and_forget_preview_use_canonical_entry(memory, tmp_path):
    entry_id = "MC-PREF-20260801-0a1b2c3d"
    write(
        memory,
        "preferences.md",
        "# Preferences\n\n" + entry(entry_id, "Exact examples", "Preference", "Prefer exact examples."),
    )
    unit = next(u for u in read_memory(tmp_path, project="p").units if u["id"] == entry_id.lower())
    # the entry id keeps its case where the peer shows it; the unit id is its casefold
    assert unit["x-mc"]["id"] == entry_id and unit["x-mc"]["file"] == "preferences.md"
    assert unit["title"] == f"{entry_id} — Exact examples"


def test_ports_candidate_promotion_is_complete_preview_only(memory, tmp_path):
    candidate = "MC-INBOX-20260801-1a2b3c4d"
    write(
        memory,
        "inbox.md",
        f"# Memory Inbox\n\n## {candidate} — Focused examples\n\nStatus: candidate\nCandidate-Type: preference\n"
        "Scope: project\nEvidence:\n- agent-observed\n\nStatement:\nPrefer focused examples.\n",
    )
    read = read_memory(tmp_path, project="p")
    unit = next(u for u in read.units if u["id"] == candidate.lower())
    assert unit["x-mc"]["unit_status"] == "candidate" and "subject" not in unit
    assert read.frame["modules"]["inbox"] == []  # never routed into a context


@pytest.mark.parametrize(
    ("filename", "code"), [("subjects.md", "MC-CONFLICT-010"), ("reconciliations.md", "MC-CONFLICT-008")]
)
def test_ports_unclosed_registry_fence_is_shared_by_conflict_and_planned_forget(memory, tmp_path, filename, code):
    # the peer's Protocol 0.7 audit tests
    write(memory, filename, f"# {filename[:-3].title()}\n\n```text\nunterminated\n")
    result = analyze_conflicts(read_memory(tmp_path, project="p", strict=False))
    assert result.status.value == "INVALID"
    assert any(f.code == code and "Unclosed fenced code block" in f.message for f in result.findings)
    status, out = audit(tmp_path)
    assert status == 1 and f"{code} INVALID" in out


def test_ports_subject_registry_schema_uses_dedicated_stable_finding_code(memory, tmp_path):
    # the peer's Protocol 0.7 audit tests
    registry(
        memory,
        subject_unit("MC-SUBJ-20260826-99999999", "Schema failure") + "\nUnknown-Field: must be diagnosed as schema\n",
    )
    result = analyze_conflicts(read_memory(tmp_path, project="p", strict=False))
    found = [f for f in result.findings if "Unknown-Field" in f.message]
    assert [(f.code, f.status.value) for f in found] == [("MC-CONFLICT-010", "INVALID")]


def test_ports_schema3_area_entry_type_round_trip(memory, tmp_path):
    # tests/test_protocol_08.py
    write(
        memory,
        "areas/backend.md",
        "# Area: Backend\n\n"
        + entry(
            "MC-AREA-20260921-abcdef12",
            "Area decision",
            "Decision",
            "Use queues.",
            scope="area:backend",
            subject="MC-SUBJ-20260921-abcdef12",
            facet="architecture",
            extra="Entry-Type: decision",
        ),
    )
    write(
        memory,
        "manifest.md",
        (memory / "manifest.md")
        .read_text(encoding="utf-8")
        .replace(
            "### Enabled areas\n- None enabled.",
            "### Enabled areas\n- `areas/backend.md`\n  - activation: path-or-explicit\n  - paths: `cli/**`",
        ),
    )
    unit = next(u for u in read_memory(tmp_path, project="p").units if u["id"] == "mc-area-20260921-abcdef12")
    assert unit["x-mc"]["entry-type"] == "decision" and unit["paths"] == ["cli/**"]


# the peer's conflict contract (cli/memory_custodian/conflicts.py), case by case: not ports of a named peer test


def test_contract_conflict_project_area_overlap_is_review(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    two_owners(memory, second_scope="area:storage")
    status, out = audit(tmp_path)
    assert status == 0 and "Conflict status: REVIEW" in out and "MC-CONFLICT-002 REVIEW" in out


def test_contract_conflict_exception_to_an_active_project_owner_clears_the_overlap(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    two_owners(memory, second_scope="area:storage", extra="Exception-To: MC-CON-20260801-11111111")
    assert audit(tmp_path) == (0, "Conflict status: CLEAR\n")
    two_owners(memory, second_scope="project", extra="Exception-To: MC-CON-20260801-11111111")
    status, out = audit(tmp_path)
    assert status == 1 and "MC-CONFLICT-006 INVALID: Invalid Exception-To relation." in out


def test_contract_conflict_duplicate_canonical_ref_and_alias(memory, tmp_path):
    other = "MC-SUBJ-20260801-bbbbbbbb"
    registry(
        memory,
        subject_unit(SUBJECT, "Storage policy", "feature:storage"),
        subject_unit(other, "Store policy", "FEATURE:storage", ("Storage  Policy",)),
    )
    status, out = audit(tmp_path)
    assert status == 1 and "MC-CONFLICT-003 CONFLICT" in out and "MC-CONFLICT-004 CONFLICT" in out


def test_contract_conflict_missing_subject_reference_is_invalid(memory, tmp_path):
    two_owners(memory)  # no registry entry for the Subject
    status, out = audit(tmp_path)
    assert status == 1 and "MC-CONFLICT-005 INVALID" in out and "Conflict status: INVALID" in out


def test_contract_conflict_matched_areas_overlap_is_review(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    write(
        memory,
        "decisions.md",
        "# Decisions\n\n"
        + entry(
            "MC-AREA-20260801-11111111", "Web", "Decision", "Web.", subject=SUBJECT, facet="behavior", scope="area:web"
        )
        + "\n"
        + entry(
            "MC-AREA-20260801-22222222", "Api", "Decision", "Api.", subject=SUBJECT, facet="behavior", scope="area:api"
        ),
    )
    assert audit(tmp_path)[0] == 0
    status, out = audit(tmp_path, "web", "api")
    assert status == 0 and "MC-CONFLICT-009 REVIEW" in out


def test_contract_conflict_duplicate_entry_id_spans_the_archive(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    two_owners(memory, second_facet="security")
    write(
        memory,
        "archive/constraints-2026-07-12.md",
        "# Archived constraints\n\n"
        + entry(
            "mc-con-20260801-11111111",
            "Old first",
            "Constraint",
            "Old.",
            subject=SUBJECT,
            facet="behavior",
            status="superseded",
            extra="Superseded-By: MC-CON-20260801-22222222",
        ),
    )
    status, out = audit(tmp_path)
    assert status == 1 and "MC-CONFLICT-008 INVALID: Duplicate Entry ID" in out


def test_contract_conflict_active_entry_outside_canonical_storage(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    write(
        memory,
        "notes.md",
        "# Notes\n\n"
        + entry("MC-DEC-20260801-33333333", "Stray", "Decision", "Stray.", subject=SUBJECT, facet="behavior"),
    )
    status, out = audit(tmp_path)
    assert (
        status == 1 and "MC-CONFLICT-007 INVALID: Active Entry is outside canonical manifest-authorized storage." in out
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "Decision:\nWrong body for a constraint.\n",
            "uses Decision body but its Entry ID/storage requires Constraint",
        ),
        ("Constraint:\nOne.\n\nConstraint:\nTwo.\n", "has duplicate Constraint fields"),
        ("Candidate-Type: constraint\n\nConstraint:\nOne.\n", "non-candidate lifecycle cannot declare Candidate-Type"),
    ],
)
def test_contract_entry_integrity_is_mc_conflict_007(memory, tmp_path, body, expected):
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    write(
        memory,
        "constraints.md",
        "# Constraints\n\n## MC-CON-20260801-11111111 — One\n\nStatus: active\nScope: project\n"
        f"Subject: {SUBJECT}\nFacet: behavior\nEvidence:\n- user-confirmed\n" + body,
    )
    status, out = audit(tmp_path)
    assert status == 1 and f"MC-CONFLICT-007 INVALID: constraints.md: MC-CON-20260801-11111111 {expected}" in out


def test_contract_archive_lineage_and_tombstones(memory, tmp_path):
    registry(memory, subject_unit(SUBJECT, "Storage policy"))
    old, new, tomb = "MC-DEC-20260701-0000000a", "MC-DEC-20260801-0000000b", "MC-TOMB-20260801-0000000c"
    write(
        memory,
        "archive/decisions-2026-07-12.md",
        "# Archived decisions\n\n"
        + entry(
            old,
            "Old",
            "Decision",
            "Old.",
            subject=SUBJECT,
            facet="behavior",
            status="superseded",
            extra=f"Superseded-By: {new}",
        ),
    )
    write(
        memory,
        "decisions.md",
        "# Decisions\n\n"
        + entry(new, "New", "Decision", "New.", subject=SUBJECT, facet="behavior", extra=f"Supersedes: {old}"),
    )
    write(
        memory,
        "do-not-use.md",
        "# Do Not Use / Tombstones\n\n" + entry(tomb, "Tombstone: forgotten", "Rejected", "[content removed]"),
    )
    read = read_memory(tmp_path, project="p")
    by_id = {u["id"]: u for u in read.units}
    assert by_id[new.lower()]["supersedes"] == [old.lower()]  # the lineage crosses into archive/
    assert "archive/decisions-2026-07-12" in read.frame["explicit_only"]
    assert by_id[tomb.lower()]["x-mc"]["id"] == tomb  # a tombstone is read, never an owner
    assert audit(tmp_path) == (0, "Conflict status: CLEAR\n")
