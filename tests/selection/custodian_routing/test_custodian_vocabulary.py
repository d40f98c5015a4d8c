"""MemoryCustodian's routing vocabulary in the product: aliases, codes, the primary-reason rule,
per-module budgets with atomic entries, exit codes. No database."""

from __future__ import annotations

import pytest
from custodian_kit import read, tree

from selection.engine.routing.codes import RouteCode
from selection.engine.routing.custodian import (
    CANONICAL_TASKS,
    MC_OF,
    McCode,
    exit_code,
    mc_code,
    primary_reason,
    task_interpretations,
)
from selection.engine.routing.custodian_output import ExplicitNameError, pack_module


def test_every_alias_names_a_canonical_task_and_development_is_ambiguous():
    assert set(CANONICAL_TASKS) == {
        "general",
        "planning",
        "implementation",
        "artifact",
        "preferences",
        "history",
        "maintenance",
    }
    assert task_interpretations("Debugging") == ("implementation",)
    assert task_interpretations("recap") == ("history",)
    assert task_interpretations("development") == ("planning", "implementation")
    assert task_interpretations("cooking") == ()


def test_fifteen_mc_codes_each_the_name_of_a_product_code():
    assert len(McCode) == 15
    assert {mc.value for mc in MC_OF.values()} | {
        "MC-ROUTE-EXPLICIT-AREA",
        "MC-ROUTE-EXPLICIT-PROFILE",
        "MC-ROUTE-EXPLICIT-RULE",
        "MC-ROUTE-AMBIGUOUS",
    } == {c.value for c in McCode}
    assert mc_code(RouteCode.ROUTE_EXPLICIT, "areas/backend.md") is McCode.EXPLICIT_AREA
    assert mc_code(RouteCode.ROUTE_EXPLICIT, "rules/output.md") is McCode.EXPLICIT_RULE


def test_the_primary_reason_puts_invalid_and_missing_first_and_skips_budget():
    assert primary_reason((McCode.TASK, McCode.MISSING_OPTIONAL)) == "MC-MISSING-OPTIONAL"
    assert (
        primary_reason((McCode.OMIT_BUDGET, McCode.PATH), ("cli/a.py <- cli/**",))
        == "MC-ROUTE-PATH (cli/a.py <- cli/**)"
    )
    assert primary_reason((McCode.PATH,), ("a <- x", "b <- y")) == "MC-ROUTE-PATH (a <- x; b <- y)"


@pytest.mark.parametrize(
    ("completeness", "conflict", "strict", "expected"),
    [
        ("COMPLETE", "CLEAR", False, 0),
        ("INCOMPLETE", "CLEAR", False, 0),
        ("AMBIGUOUS", "CLEAR", False, 1),
        ("INVALID", "CLEAR", False, 2),
        ("COMPLETE", "CONFLICT", False, 2),
        ("COMPLETE", "CLEAR", True, 0),
        ("INCOMPLETE", "CLEAR", True, 1),
        ("AMBIGUOUS", "CLEAR", True, 2),
        ("INVALID", "CLEAR", True, 2),
        ("INCOMPLETE", "CONFLICT", True, 2),
        ("COMPLETE", "REVIEW", True, 2),
    ],
)
def test_exit_codes_with_and_without_strict_routing(completeness, conflict, strict, expected):
    assert exit_code(completeness, conflict, strict=strict, task="implementation") == expected


def test_a_module_budget_keeps_whole_entries_and_names_the_omitted_ones():
    entry = "## MC-DEC-20260801-{n:08x} — Decision {n}\n\n" + " ".join(["word"] * 300) + "\n\n"
    text = "# Decisions\n\n" + "".join(entry.format(n=n) for n in range(1, 5))
    packed, omitted, oversized = pack_module("decisions.md", text)
    assert packed.count("## MC-DEC-") == 2 and not oversized
    assert omitted == ("MC-DEC-20260801-00000003", "MC-DEC-20260801-00000004")


def test_a_first_entry_larger_than_the_budget_is_included_whole_and_oversized():
    text = "# Constraints\n\n## MC-CON-20260801-00000001 — Long\n\n" + " ".join(["word"] * 500) + "\n"
    packed, omitted, oversized = pack_module("constraints.md", text)
    assert oversized and omitted == () and packed.endswith("word")


def test_budget_omissions_and_oversized_entries_in_the_read(tmp_path):
    big = "# Constraints\n\n## MC-CON-20260801-00000001 — Long\n\n" + " ".join(["word"] * 500) + "\n"
    got = read(tree(tmp_path / "p", {"constraints.md": big}), "implementation")
    assert "Oversized atomic entries:\n- constraints.md: one atomic entry exceeds the 400-token budget" in got.text
    row = next(m for m in got.doc["data"]["module_dispositions"] if m["module_id"] == "constraints.md")
    assert row["oversized"] is True


def test_a_malformed_explicit_slug_is_refused(tmp_path):
    with pytest.raises(ExplicitNameError, match="Invalid explicit module name"):
        read(tree(tmp_path / "p", {}), "implementation", areas=["../x"])
