"""Gates that can say "no worse": superiority, non-inferiority and review-only, per kind of change.

The rollback tests run the real replays inline on the context-lab corpus: a looser stop rule is
promoted as v2, then a rollback restores v1, which superiority could never pass (v1 scores below
v2) and which non-inferiority against v1's own recorded replays passes.
"""

from __future__ import annotations

import pytest

from authority.selectors import current_frame_version
from backtest.review import card, standards
from backtest.review import services as review_services
from backtest.services import backtest_enqueue
from governance.proposals import promotion, services
from rules import frame_patch
from rules import gate_verdict as gate_rules
from selection.corpus.gate_standards import gate_standards

from .conftest import proposal
from .test_services import run_inline

TASKS = [f"t{i}" for i in range(12)]


def _side(values):
    return {t: {"must_include_recall": v} for t, v in zip(TASKS, values, strict=True)}


def test_non_inferiority_passes_a_candidate_no_worse_than_the_margin_where_superiority_fails():
    base = _side([0.8] * 12)
    cand = _side([0.8] * 10 + [0.78, 0.8])
    gates = {"primary": "must_include_recall"}
    assert not gate_rules.decide(gates, base, cand).passed
    loose = gate_rules.decide(gates, base, cand, standard=gate_rules.Standard("non_inferiority", margin=0.05))
    assert loose.passed and loose.primary.standard == "non_inferiority"
    assert "no worse" in loose.primary.reason and "95 % interval's lower bound" in loose.primary.reason
    strict = gate_rules.decide(gates, base, cand, standard=gate_rules.Standard("non_inferiority", margin=0.0))
    assert not strict.passed and "it must be no worse" in strict.primary.reason
    same = gate_rules.decide(gates, base, base, standard=gate_rules.Standard("non_inferiority"))
    assert same.passed  # equal replays are no worse, where superiority would ask for a rise


def test_review_only_passes_and_judges_no_limit():
    gates = {"primary": "must_include_recall", "limits": [{"metric": "must_include_recall", "min": 0.99}]}
    base = _side([0.8] * 12)
    decided = gate_rules.decide(gates, base, base, standard=gate_rules.Standard("review_only", against="purpose"))
    assert decided.passed and len(decided.gates) == 1
    assert "touches no selection input (purpose): it needs review only" in decided.primary.reason


def test_a_change_of_words_alone_is_neutral_and_an_edit_of_what_selects_is_not():
    base = {"purpose": "a", "class_pull": 3, "gates": {"primary": "precision"}}
    assert gate_rules.change_kind("change", base, {**base, "purpose": "b", "x-note": "n"}) == (
        "neutral",
        ("purpose", "x-note"),
    )
    assert gate_rules.change_kind("rollback", base, {**base, "class_pull": 2})[0] == "rollback"


def test_a_frame_declares_the_standard_of_each_kind_and_review_only_is_for_neutral_changes_only():
    frame = {
        "gates": {"primary": "must_include_recall", "held_to": {"rollback": "superiority"}, "margin": 0.02},
        "scope": ["alpha"],
    }
    assert frame_patch.frame_issues(frame, project="alpha", declared={"alpha"}) == []
    declared = gate_standards(frame["gates"])
    assert declared.standard("rollback") == "superiority" and declared.standard("neutral") == "review_only"
    assert declared.margin == 0.02 and gate_standards(None).standard("rollback") == "non_inferiority"
    bad = {"gates": {"held_to": {"change": "review_only", "rebase": "better"}, "margin": 3}}
    messages = [str(i) for i in frame_patch.frame_issues(bad, project="alpha", declared={"alpha"})]
    assert any("held_to.change" in m and "cannot be held to review only" in m for m in messages), messages
    assert any("held_to.rebase" in m for m in messages) and any("margin" in m for m in messages), messages


def _approve_and_promote(target, users):
    backtest = target.backtests.order_by("-id").first()
    run_inline(backtest)
    worse = [r.task for r in card.regressed_tasks(backtest=backtest)]
    review_services.backtest_review(
        backtest=backtest, reviewer=users["reviewer"], verdict="approve", comment="ok", acknowledged=worse
    )
    return promotion.proposal_promote(proposal=target, lead=users["lead"])


@pytest.fixture
def promoted_v2(sift, sift_users, django_capture_on_commit_callbacks):
    """The looser stop rule backtested, approved and promoted over v1."""
    looser = proposal("looser-stop-rule")
    backtest_enqueue(proposal=looser, requested_by=None)
    _approve_and_promote(looser, sift_users)
    return current_frame_version(project=sift)


def _rollback(sift, lead, to_version, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):  # its backtest is run inline below
        rollback = promotion.proposal_rollback(project=sift, author=lead, to_version=to_version)
    return rollback, backtest_enqueue(proposal=rollback, requested_by=None)


def test_a_rollback_to_a_promoted_version_is_judged_no_worse_against_its_own_replays_and_lands(
    sift, sift_users, promoted_v2, django_capture_on_commit_callbacks
):
    v1 = promoted_v2.parent
    rollback, backtest = _rollback(sift, sift_users["lead"], v1, django_capture_on_commit_callbacks)
    entry = backtest.gates["standard"]
    assert entry["name"] == "non_inferiority" and entry["kind"] == "rollback"
    assert entry["reference"]["version"] == v1.number and entry["reference"]["side"] == "baseline"
    decision = run_inline(backtest)
    primary = decision.gate_results[0]
    assert decision.passed, [g["reason"] for g in decision.gate_results]
    assert primary["standard"] == "non_inferiority" and f"v{v1.number}'s own recorded replays" in primary["reason"]
    assert "Held to non-inferiority as a rollback" in standards.standard_sentence(backtest)
    _approve_and_promote(rollback, sift_users)
    assert current_frame_version(project=sift).snapshot == v1.snapshot


def test_the_same_rollback_held_to_superiority_by_its_frame_fails(
    sift, sift_users, promoted_v2, django_capture_on_commit_callbacks
):
    strict = {"gates": {"held_to": {"rollback": "superiority"}}}
    with django_capture_on_commit_callbacks(execute=False):
        tighten = services.proposal_submit(
            project=sift, author=sift_users["lead"], title="Hold rollbacks to a rise", patch=strict
        )
    backtest = backtest_enqueue(proposal=tighten, requested_by=None)
    assert backtest.gates["standard"]["name"] == "review_only"  # a gates edit touches no selection input
    _approve_and_promote(tighten, sift_users)
    rollback, backtest = _rollback(sift, sift_users["lead"], promoted_v2.parent, django_capture_on_commit_callbacks)
    assert backtest.gates["standard"]["name"] == "superiority"
    assert not run_inline(backtest).passed
