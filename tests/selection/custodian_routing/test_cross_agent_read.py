"""The peer's cross-agent read case, over a tree this test builds: a seeded project with a subject,
a path-routed area and an explicit-only profile, read for implementation with one touched path.

EXPECTED is written from the peer's renderer (context_result.render_context_result: header, the
module groups with --explain, policy exclusions, dimensions, budget omissions, conflict status,
then each loaded module's packed text), and its hash the peer's way: SHA-256 of the UTF-8, LF text
with a final newline. The product must print these bytes and that hash."""

from __future__ import annotations

import hashlib

from custodian_kit import BACKEND, SUBJECT, read, tree

OPTIONAL = (
    "### Enabled profiles\n- `profiles/reviewer.md`\n  - activation: explicit-only\n\n"
    "### Enabled areas\n- `areas/backend.md`\n  - activation: path\n  - paths: `cli/**`\n"
)
FILES = {
    "decisions.md": (
        "# Decisions\n\n## MC-DEC-20260801-11111111 — Notes as JSON\n\n"
        f"Status: active\nScope: project\nSubject: {SUBJECT}\nFacet: architecture\n\n"
        "Decision:\nNotes persist as human-readable local JSON files.\n"
    ),
    "areas/backend.md": BACKEND,
    "profiles/reviewer.md": "# Reviewer\n\nName the risk first.\n",
}

EXPECTED = f"""\
# Memory Context Pack
Task: implementation
Canonical task: implementation
Paths:
- cli/store.py (missing-on-disk)
Explicit scope:
- none supplied
Routing completeness: COMPLETE
Local overlay status: DISABLED
Loaded:
- brief.md
  Disposition: loaded
  Reason: MC-ROUTE-ALWAYS
- decisions.md
  Disposition: loaded
  Reason: MC-ROUTE-TASK
  Matching input: task:implementation
- constraints.md
  Disposition: loaded
  Reason: MC-ROUTE-TASK
  Matching input: task:implementation
- do-not-use.md
  Disposition: loaded
  Reason: MC-ROUTE-TASK
  Matching input: task:implementation
- areas/backend.md
  Disposition: loaded
  Reason: MC-ROUTE-PATH (cli/store.py <- cli/**)
Skipped optional:
- profiles/reviewer.md
  Disposition: skipped
  Reason: MC-SKIP-NOT-REQUESTED
Missing required:
- none
Missing optional:
- preferences.md
  Disposition: missing-optional
  Reason: MC-MISSING-OPTIONAL
  Matching input: task:implementation
Invalid:
- none
Policy exclusions:
- inbox.md: candidate/maintenance-only; excluded from normal task context
- archive/: explicit maintenance only; archive files were not enumerated
Incomplete dimensions:
- none
Budget omissions:
- none
Conflict status: CLEAR

## brief.md

# Project Brief

Purpose:
Protocol 0.7 release tests.

## decisions.md

# Decisions

## MC-DEC-20260801-11111111 — Notes as JSON

Status: active
Scope: project
Subject: {SUBJECT}
Facet: architecture

Decision:
Notes persist as human-readable local JSON files.

## constraints.md

# Constraints

## MC-CON-20260801-11111111 — Dependency-free CLI

Constraint:
The CLI uses the standard library only.

## do-not-use.md

# Do Not Use

## MC-DNU-20260801-11111111 — No pickle

Do not store notes with pickle.

## areas/backend.md

# Backend

## MC-AREA-20260801-11111111 — Storage layer

The store writes through one module.
"""


def _read(tmp_path):
    return read(
        tree(tmp_path / "p", FILES, optional=OPTIONAL), "implementation", paths=["cli/store.py"], names_only=False
    )


def test_cross_agent_read__complete_with_the_loaded_modules_in_order(tmp_path):
    got = _read(tmp_path)
    assert got.code == 0 and got.read.completeness == "COMPLETE"
    assert got.doc["data"]["loaded_modules"] == [
        "brief.md",
        "decisions.md",
        "constraints.md",
        "do-not-use.md",
        "areas/backend.md",
    ]


def test_cross_agent_read__dispositions_and_reason_codes(tmp_path):
    rows = {
        m["module_id"]: (m["disposition"], m["reasons"], m["details"])
        for m in _read(tmp_path).doc["data"]["module_dispositions"]
    }
    assert rows == {
        "areas/backend.md": ("loaded", ["MC-ROUTE-PATH"], ["cli/store.py <- cli/**"]),
        "brief.md": ("loaded", ["MC-ROUTE-ALWAYS"], []),
        "constraints.md": ("loaded", ["MC-ROUTE-TASK"], []),
        "decisions.md": ("loaded", ["MC-ROUTE-TASK"], []),
        "do-not-use.md": ("loaded", ["MC-ROUTE-TASK"], []),
        "preferences.md": ("missing-optional", ["MC-ROUTE-TASK", "MC-MISSING-OPTIONAL"], []),
        "profiles/reviewer.md": ("skipped", ["MC-SKIP-NOT-REQUESTED"], []),
    }


def test_cross_agent_read__entry_ids_subject_ids_and_the_peer_context_sha256(tmp_path):
    got = _read(tmp_path)
    data = got.doc["data"]
    assert data["loaded_entry_ids"] == [
        "MC-DEC-20260801-11111111",
        "MC-CON-20260801-11111111",
        "MC-DNU-20260801-11111111",
        "MC-AREA-20260801-11111111",
    ]
    assert data["subject_ids"] == [SUBJECT]
    assert got.text == EXPECTED
    assert data["context_sha256"] == hashlib.sha256(EXPECTED.encode("utf-8")).hexdigest()
