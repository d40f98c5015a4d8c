"""Cases of MemoryCustodian's tests/test_protocol_07.py and tests/test_protocol_07_release_gaps.py,
each named after the peer test it ports (a double underscore names the sub-case), over trees the
tests build. The peer's CLI call is read() in custodian_kit: the same tree, read and routed by the
product, rendered in the peer's words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from custodian_kit import AREA_BACKEND, BACKEND, PROJECT, SUBJECT, read, tree

from selection.engine.routing.globs import matches, normalise
from selection.engine.types import Unit

REPO = Path(__file__).resolve().parents[3]


def backend(tmp_path):
    return tree(tmp_path / "p", {"areas/backend.md": BACKEND}, optional=AREA_BACKEND)


# -- tests/test_protocol_07.py --------------------------------------------------------------------


def test_path_routed_area_requires_scope_and_matches_planned_path__strict_without_scope_exits_1(tmp_path):
    got = read(backend(tmp_path), "implementation", strict=True)
    assert got.code == 1
    assert "Routing completeness: INCOMPLETE" in got.text


def test_path_routed_area_requires_scope_and_matches_planned_path__explain_names_scope_missing(tmp_path):
    got = read(backend(tmp_path), "implementation")
    assert "MC-SKIP-SCOPE-MISSING" in got.text
    assert got.code == 0  # INCOMPLETE without --strict-routing still reads


def test_path_routed_area_requires_scope_and_matches_planned_path__planned_path_loads_the_area(tmp_path):
    got = read(backend(tmp_path), "implementation", strict=True, paths=["cli/planned.py"])
    assert got.code == 0
    assert "cli/planned.py (missing-on-disk)" in got.text
    assert "- areas/backend.md" in got.text
    assert "Reason: MC-ROUTE-PATH (cli/planned.py <- cli/**)" in got.text


def test_path_routed_area_requires_scope_and_matches_planned_path__a_miss_keeps_the_area_out(tmp_path):
    """The defect the peer's users trust: a path miss must not reach the bundle through ranking."""
    root = backend(tmp_path)
    hit = read(root, "implementation", paths=["cli/a.py"], query="storage layer writes through one module")
    miss = read(root, "implementation", paths=["web/a.ts"], query="storage layer writes through one module")
    area = "mc-area-20260801-11111111"
    assert area in hit.bundle_units
    assert area not in miss.bundle_units
    assert "MC-SKIP-NO-PATH-MATCH" in miss.text
    assert hit.doc["data"]["context_sha256"] != miss.doc["data"]["context_sha256"]


def test_glob_dialect_and_separator_normalization__double_star_matches_any_depth():
    assert matches("**/*.py", "root.py")
    assert matches("**/*.py", "cli/root.py")


def test_glob_dialect_and_separator_normalization__trailing_double_star_matches_below():
    assert matches("web/**", "web/a/b.ts")


def test_glob_dialect_and_separator_normalization__single_star_stays_in_one_segment():
    assert not matches("web/*", "web/a/b.ts")


def test_glob_dialect_and_separator_normalization__backslash_paths_are_normalised(tmp_path):
    assert normalise("cli\\new.py") == "cli/new.py"
    got = read(backend(tmp_path), "implementation", paths=["cli\\new.py"])
    assert got.code == 0
    assert "- cli/new.py (missing-on-disk)" in got.text


def _duplicate_owner(tmp_path):
    entry = (
        "## MC-CON-20260801-{n} — {title}\n\n"
        "Status: active\nScope: project\nSubject: {s}\nFacet: behavior\n\n{title}.\n"
    )
    constraints = "# Constraints\n\n" + "\n".join(
        entry.format(n=n, title=t, s=SUBJECT) for n, t in (("11111111", "First"), ("22222222", "Second"))
    )
    return tree(tmp_path / "p", {"constraints.md": constraints})


def test_conflict_check_and_strict_read_block_duplicate_owner__strict_read_exits_2(tmp_path):
    got = read(_duplicate_owner(tmp_path), "implementation", strict=True)
    assert got.code == 2
    assert "Context pack not approved for substantial work" in got.text
    assert "Conflict status: CONFLICT" in got.text and "MC-CONFLICT-001" in got.text


def test_conflict_check_and_strict_read_block_duplicate_owner__plain_read_reports_the_conflict(tmp_path):
    got = read(_duplicate_owner(tmp_path), "implementation")
    assert got.code == 2  # an unresolved conflict exits 2 with or without strict routing
    assert "Context pack contains unresolved active-memory conflict" in got.text
    assert got.doc["status"] == "FAIL" and got.doc["exit_class"] == "blocker"


def _local():
    return (Unit(id="local-pref", project=PROJECT, evidence_class="preference", text="Prefer concise output."),)


def test_local_overlay_requires_binding_and_no_local_excludes_it__no_local_leaves_it_out(tmp_path):
    root = tree(tmp_path / "p", {})
    shared = read(root, "general", no_local=True, local_units=_local(), names_only=False)
    assert "Prefer concise output." not in shared.text
    assert "Local overlay status: DISABLED" in shared.text


def test_local_overlay_requires_binding_and_no_local_excludes_it__combined_read_adds_it(tmp_path):
    root = tree(tmp_path / "p", {})
    combined = read(root, "general", local_units=_local(), names_only=False)
    assert "Prefer concise output." in combined.text
    assert "Local overlay status: BOUND" in combined.text


def test_missing_required_module_is_incomplete__explain_names_the_dimension(tmp_path):
    got = read(tree(tmp_path / "p", {"constraints.md": None}), "implementation")
    assert got.code == 0
    assert "Routing completeness: INCOMPLETE" in got.text
    assert "required-module-missing" in got.text
    assert "MC-MISSING-REQUIRED" in got.text


def test_missing_required_module_is_incomplete__strict_read_exits_1(tmp_path):
    got = read(tree(tmp_path / "p", {"constraints.md": None}), "implementation", strict=True)
    assert got.code == 1
    assert "Context pack not approved for substantial work" in got.text


def test_path_order_and_duplicates_produce_identical_context__order(tmp_path):
    root = backend(tmp_path)
    first = read(root, "implementation", paths=["README.md", "cli/a.py"])
    second = read(root, "implementation", paths=["cli/a.py", "README.md"])
    assert first.text == second.text


def test_path_order_and_duplicates_produce_identical_context__duplicates(tmp_path):
    root = backend(tmp_path)
    first = read(root, "implementation", paths=["README.md", "cli/a.py"])
    second = read(root, "implementation", paths=["cli/a.py", "README.md", "cli/a.py"])
    assert first.text == second.text and first.bundle_units == second.bundle_units


# -- tests/test_protocol_07_release_gaps.py -------------------------------------------------------


def test_ambiguous_result_surface_remains_reserved_and_fail_closed__plain_read_exits_1(tmp_path):
    got = read(tree(tmp_path / "p", {}), "development")  # the reserved alias: planning or implementation
    assert got.code == 1
    assert "Routing completeness: AMBIGUOUS" in got.text
    assert "MC-ROUTE-AMBIGUOUS" in got.text


def test_ambiguous_result_surface_remains_reserved_and_fail_closed__strict_read_exits_2(tmp_path):
    got = read(tree(tmp_path / "p", {}), "development", strict=True)
    assert got.code == 2
    assert "Context pack not approved" in got.text


def test_pre_metadata_legacy_routing_remains_compatible(tmp_path):
    got = read(tree(tmp_path / "p", {}), "implementation", strict=True)  # no Protocol section
    assert got.code == 0
    assert "Routing completeness: COMPLETE" in got.text


def test_rendering_is_stable_across_hash_seeds(tmp_path):
    root = backend(tmp_path)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from custodian_kit import read; print(read(Path(sys.argv[2]), 'implementation').text, end='')"
    )
    outputs = []
    for seed in ("1", "987654"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO))
        done = subprocess.run(
            [sys.executable, "-c", script, str(Path(__file__).parent), str(root)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=REPO,
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and "Routing completeness" in outputs[0]


PROFILES = (
    "### Enabled profiles\n"
    "- `profiles/a.md`\n  - activation: explicit-only\n"
    "- `profiles/b.md`\n  - activation: explicit-only\n"
)
PROFILE_FILES = {"profiles/a.md": "# Profile A\n\nPrefer tables.\n", "profiles/b.md": "# Profile B\n\nPrefer lists.\n"}


def test_optional_declaration_and_filesystem_order_are_deterministic__swapped_declarations(tmp_path):
    first = read(tree(tmp_path / "one", PROFILE_FILES, optional=PROFILES), "implementation", profiles=["a", "b"])
    swapped = PROFILES.replace("a.md", "X").replace("b.md", "a.md").replace("X", "b.md")
    second = read(tree(tmp_path / "two", PROFILE_FILES, optional=swapped), "implementation", profiles=["a", "b"])
    assert first.text == second.text


def test_optional_declaration_and_filesystem_order_are_deterministic__profiles_load_by_slug(tmp_path):
    got = read(tree(tmp_path / "p", PROFILE_FILES, optional=PROFILES), "implementation", profiles=["b", "a"])
    assert got.doc["data"]["loaded_modules"][-2:] == ["profiles/a.md", "profiles/b.md"]
    assert "Reason: MC-ROUTE-EXPLICIT-PROFILE" in got.text and "Matching input: profile:a" in got.text
    assert "- profile:a\n- profile:b" in got.text


def test_optional_declaration_and_filesystem_order_are_deterministic__unknown_profile_is_missing_optional(tmp_path):
    got = read(tree(tmp_path / "p", PROFILE_FILES, optional=PROFILES), "implementation", profiles=["c"])
    row = next(m for m in got.doc["data"]["module_dispositions"] if m["module_id"] == "profiles/c.md")
    assert row["disposition"] == "missing-optional"
    assert row["reasons"] == ["MC-ROUTE-EXPLICIT-PROFILE", "MC-MISSING-OPTIONAL"]
    assert "Explicit profile 'c' is not enabled in the manifest." in got.text
    assert got.code == 0 and got.read.completeness == "COMPLETE"


def test_invalid_routing_uses_structured_result_and_stderr__an_escaping_path_is_invalid(tmp_path):
    got = read(backend(tmp_path), "implementation", paths=["../outside.py"])
    assert got.code == 2
    assert "Routing completeness: INVALID" in got.text
    assert "- manifest.md\n  Disposition: invalid\n  Reason: MC-ROUTE-INVALID" in got.text
    assert got.doc["data"]["incomplete_dimensions"] == ["invalid-routing"]
    assert got.doc["exit_class"] == "blocker" and got.doc["data"]["loaded_modules"] == []


def test_path_routed_area_requires_scope_and_matches_planned_path__only_substantial_work_needs_scope(tmp_path):
    got = read(backend(tmp_path), "preferences", strict=True)
    assert got.code == 0 and got.read.completeness == "COMPLETE"
    assert "MC-SKIP-SCOPE-MISSING" in got.text  # the area is still skipped for want of a scope
    assert got.trace.routing.completeness == "COMPLETE" and not got.trace.routing.refused
