"""The peer's manifest and Protocol cases (tests/test_protocol_07.py and
tests/test_protocol_07_release_gaps.py of waittim/MemoryCustodian), over trees built here.

Each test is named after the peer test it ports; a peer test with sub-cases is parametrized. The
peer runs `read` / `check --routing`; here the reader (read_memory) refuses what the peer refuses,
and `import_memory --check` exits 2 where the peer's read exits 2 (INVALID).
"""

from __future__ import annotations

import re

import pytest

from selection.corpus import CorpusError
from selection.corpus.memory_markdown import read_memory
from tests.selection.custodian.trees import PLANNING, edit_manifest, init_extended

PROTOCOL_KEYS = (
    "protocol_version|entry_schema_version|subject_schema_version|subject_registry|routing_schema_version|"
    "conflict_schema_version|initialized_with|last_migrated_with|project_id|admission_policy|routing_policy|"
    "conflict_policy"
)


def refusals(root) -> list[str]:
    with pytest.raises(CorpusError) as caught:
        read_memory(root, project="p")
    return [str(issue) for issue in caught.value.issues]


def reads(root):
    return read_memory(root, project="p")


@pytest.fixture
def memory(tmp_path):
    return init_extended(tmp_path)


def manifest(memory) -> str:
    return (memory / "manifest.md").read_text(encoding="utf-8")


def rewrite(memory, text: str) -> None:
    (memory / "manifest.md").write_text(text, encoding="utf-8")


def test_ports_optional_grammar_rejects_duplicate_scalar_and_module(memory, tmp_path):
    edit_manifest(
        memory,
        "### Enabled rules\n- None enabled.",
        "### Enabled rules\n- `rules/output.md`\n  - activation: task\n  - activation: task-or-explicit\n"
        "  - tasks: artifact",
    )
    assert any("duplicate optional module key" in m for m in refusals(tmp_path))
    rewrite(memory, manifest(memory).replace("  - activation: task-or-explicit\n", ""))
    edit_manifest(
        memory, "\n### Enabled profiles", "\n- `rules/output.md`\n  - activation: explicit-only\n\n### Enabled profiles"
    )
    assert any("duplicate optional module declaration" in m for m in refusals(tmp_path))


@pytest.mark.parametrize(
    ("case", "mutate", "expected"),
    [
        (
            "duplicate subsection",
            lambda t: t.replace(
                "### Enabled profiles", "### Enabled rules\n- None enabled.\n\n### Enabled profiles", 1
            ),
            "duplicate optional module subsection",
        ),
        (
            "sentinel beside a module",
            lambda t: t.replace(
                "### Enabled rules\n- None enabled.",
                "### Enabled rules\n- None enabled.\n- `rules/output.md`\n  - activation: explicit-only",
                1,
            ),
            "contradictory optional module sentinel",
        ),
        (
            "unknown route heading",
            lambda t: t.replace(
                f"### {PLANNING}",
                f"### Unknown task route\nLoad:\n- decisions.md\n\n### {PLANNING}",
                1,
            ),
            "unknown H3 route heading",
        ),
        (
            "bullet outside a subsection",
            lambda t: t.replace(
                "## Optional module index\n",
                "## Optional module index\n\n- `rules/output.md`\n  - activation: explicit-only\n",
                1,
            ),
            "outside a canonical subsection",
        ),
    ],
)
def test_ports_optional_and_task_topology_fail_closed(memory, tmp_path, case, mutate, expected):
    rewrite(memory, mutate(manifest(memory)))
    assert any(expected in m for m in refusals(tmp_path)), case


@pytest.mark.parametrize(
    ("case", "mutate"),
    [
        ("setext", lambda t: t.replace("## MemoryCustodian Protocol", "MemoryCustodian Protocol\n---", 1)),
        (
            "attached-closing-hash",
            lambda t: t.replace("## MemoryCustodian Protocol", "## MemoryCustodian Protocol#", 1),
        ),
        ("indented-metadata", lambda t: re.sub(rf"(?m)^(- (?:{PROTOCOL_KEYS}):)", r"    \1", t)),
    ],
)
def test_ports_protocol_heading_edges_fail_closed_without_rejecting_comments(memory, tmp_path, case, mutate):
    rewrite(memory, mutate(manifest(memory)))
    assert refusals(tmp_path), case


def test_ports_protocol_heading_edges_fail_closed_without_rejecting_comments_comment(memory, tmp_path):
    rewrite(memory, manifest(memory).rstrip() + "\n\n<!--\n## MemoryCustodian Protocol\n- protocol_version: 0.6\n-->\n")
    assert reads(tmp_path).protocol["protocol_version"] == "0.8"


def test_ports_duplicate_optional_module_index_invalidates_all_contract_gates(memory, tmp_path):
    rewrite(
        memory,
        manifest(memory).rstrip()
        + "\n\n## Optional module index\n\n### Enabled rules\n- `rules/evil.md`\n  - activation: explicit-only\n",
    )
    assert any("at most one Optional module index" in m for m in refusals(tmp_path))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda t: t.replace("## Load by task", "## Other task routes", 1), "unknown manifest section"),
        (lambda t: t.rstrip() + "\n\n## Load by task\n", "expected exactly one 'Load by task' section, found 2"),
        (
            lambda t: t.rstrip() + f"\n\n## Other task routes\n\n### {PLANNING}\nLoad:\n- decisions.md\n",
            "canonical heading appears outside",
        ),
    ],
)
def test_ports_task_routes_require_one_parent_and_no_out_of_parent_canonical_h3(memory, tmp_path, mutate, expected):
    rewrite(memory, mutate(manifest(memory)))
    assert any(expected in m for m in refusals(tmp_path))


def test_ports_task_routes_require_one_parent_found_0(memory, tmp_path):
    rewrite(memory, re.sub(r"(?s)## Load by task\n.*?(?=## Optional module index)", "", manifest(memory)))
    assert any("expected exactly one 'Load by task' section, found 0" in m for m in refusals(tmp_path))


def test_ports_migration_reuses_normalized_protocol_heading(memory, tmp_path):
    rewrite(
        memory,
        manifest(memory)
        .replace("## MemoryCustodian Protocol", "## MEMORYCUSTODIAN PROTOCOL ##", 1)
        .replace("- protocol_version: 0.8", "- protocol_version: 0.6", 1),
    )
    assert reads(tmp_path).protocol["protocol_version"] == "0.6"  # an older protocol reads as written


def test_ports_routing_contract_gates_writers_recovery_and_focused_checks(memory, tmp_path):
    edit_manifest(memory, "- brief.md\n- constraints.md", "- ../outside.md\n- constraints.md")
    assert any("unsafe or malformed memory path" in m for m in refusals(tmp_path))


def test_ports_protocol_heading_scan_respects_markdown_code(memory, tmp_path):
    original = manifest(memory)
    rewrite(memory, original.replace("## MemoryCustodian Protocol", "    ## MemoryCustodian Protocol", 1))
    assert any("exactly one MemoryCustodian Protocol heading" in m for m in refusals(tmp_path))
    rewrite(memory, original.rstrip() + "\n\n```markdown\n## MemoryCustodian Protocol\n- protocol_version: 0.6\n```\n")
    assert reads(tmp_path).protocol["protocol_version"] == "0.8"


def test_ports_plain_check_classifies_malformed_only_heading_as_invalid(memory, tmp_path):
    edit_manifest(memory, "## MemoryCustodian Protocol", "### MemoryCustodian Protocol")
    assert any("exactly one MemoryCustodian Protocol heading" in m for m in refusals(tmp_path))


@pytest.mark.parametrize(
    ("state", "mutate", "expected"),
    [
        (
            "duplicate-heading",
            lambda t: t.rstrip() + "\n\n## MemoryCustodian Protocol\n- protocol_version: 0.6\n",
            "exactly one MemoryCustodian Protocol heading",
        ),
        (
            "missing-schema",
            lambda t: re.sub(r"(?m)^- routing_schema_version:.*\n", "", t),
            "Protocol 0.8 requires routing_schema_version: 1; manifest has missing",
        ),
        (
            "noncanonical-version",
            lambda t: t.replace("- protocol_version: 0.8", "- protocol_version: 0.8.0", 1),
            "must use the canonical value 0.8; manifest has '0.8.0'",
        ),
        (
            "invalid-project-id",
            lambda t: re.sub(r"(?m)^- project_id:.*$", "- project_id: invalid", t),
            "Protocol 0.8 requires a valid UUIDv4 project_id",
        ),
    ],
)
def test_ports_invalid_protocol_contract_is_rejected_across_public_entrypoints(
    memory, tmp_path, state, mutate, expected
):
    rewrite(memory, mutate(manifest(memory)))
    assert any(expected in m for m in refusals(tmp_path)), state


def test_ports_invalid_protocol_contract_newer_protocol(memory, tmp_path):
    edit_manifest(memory, "- protocol_version: 0.8", "- protocol_version: 0.9")
    assert any("Project protocol 0.9 is newer than this CLI supports (0.8)" in m for m in refusals(tmp_path))


@pytest.mark.parametrize(
    ("case", "mutate", "refused"),
    [
        ("code span opening a comment", lambda t: "`<!--`\n\n" + t, False),
        (
            "tilde fence with a backtick info string",
            lambda t: (
                t.rstrip() + "\n\n~~~`legal tilde info\n## MemoryCustodian Protocol\n- protocol_version: 0.6\n~~~\n"
            ),
            False,
        ),
        ("backtick fence with a backtick info string", lambda t: "```python`invalid\n" + t + "\n```\n", True),
    ],
)
def test_ports_manifest_lexical_contract_handles_code_spans_and_fence_info(memory, tmp_path, case, mutate, refused):
    rewrite(memory, mutate(manifest(memory)))
    if refused:
        assert any("must not contain backticks" in m for m in refusals(tmp_path)), case
    else:
        assert reads(tmp_path).protocol["protocol_version"] == "0.8", case


def test_ports_migration_rejects_unparsed_and_escaping_optional_operands_before_seed(memory, tmp_path):
    edit_manifest(
        memory,
        "## Optional module index\n",
        "## Optional module index\n\n- `areas/../../../outside.md`\n  - activation: path\n  - paths: `src/**`\n",
    )
    assert any("outside a canonical subsection" in m for m in refusals(tmp_path))


def test_ports_missing_required_module_is_incomplete(memory, tmp_path):
    (memory / "constraints.md").unlink()
    read = reads(tmp_path)
    # routed as missing-required: the module is in the frame, with no units
    assert read.frame["modules"]["constraints"] == []
    assert "constraints" in read.frame["task_categories"]["implementation"]["load"]


def test_contract_manifest_without_protocol_reads_as_before_the_protocol(memory, tmp_path):
    rewrite(memory, re.sub(r"(?s)## MemoryCustodian Protocol\n.*?\n\n", "", manifest(memory), count=1))
    read = reads(tmp_path)
    assert read.protocol == {} and not read.governed and read.frame["modules"]["brief"] == ["brief"]


def test_ports_migration_operand_decode_failure_precedes_all_pending_seeds(memory, tmp_path):
    (memory / "decisions.md").write_bytes(b"\xff\xfe")
    assert any("docs/memory/decisions.md" in m and "is not UTF-8" in m for m in refusals(tmp_path))


def test_ports_migration_rejects_unparsed_and_escaping_optional_operands_symlink(memory, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n\n## Outside section\nDecision:\nDo not touch.\n", encoding="utf-8")
    edit_manifest(
        memory,
        "### Enabled areas\n- None enabled.",
        "### Enabled areas\n- `areas/link.md`\n  - activation: path\n  - paths: `src/**`",
    )
    (memory / "areas").mkdir()
    (memory / "areas" / "link.md").symlink_to(outside)
    assert any("must not be a symlink" in m for m in refusals(tmp_path))
