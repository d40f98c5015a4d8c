"""Reviews bind to one backtest; promotion needs the latest passed and approved; one race winner."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from authority import selectors
from authority import services as authority_services
from authority.access import AccessDenied
from authority.models import AuditEntry, FrameVersion, Promotion
from backtest import errors as backtest_errors
from backtest.models import Approval
from backtest.review import selectors as backtest_selectors
from backtest.review import services as review_services
from governance.models import Proposal
from governance.proposals import errors as proposal_errors
from governance.proposals import promotion as promotions
from governance.proposals import services


def approve(backtest, users, verdict="approve", comment="looks right"):
    return review_services.backtest_review(
        backtest=backtest, reviewer=users["reviewer"], verdict=verdict, comment=comment
    )


@pytest.fixture
def ready(submit, make_backtest, users):
    """A proposal whose latest backtest passed and is approved."""
    proposal = submit()
    backtest = make_backtest(proposal)
    approve(backtest, users)
    return Proposal.objects.get(pk=proposal.pk)


def test_approval_binds_to_that_exact_backtest(submit, make_backtest, users):
    proposal = submit()
    backtest = make_backtest(proposal, digest="tasks-abc")
    approval = approve(backtest, users)
    assert (
        approval.backtest,
        approval.frame_version,
        approval.task_set_digest,
        approval.engine_version,
    ) == (backtest, proposal.frame_version, "tasks-abc", backtest.engine_version)
    assert Proposal.objects.get(pk=proposal.pk).state == "approved"
    entry = AuditEntry.objects.filter(action="backtest.approved").get()
    assert entry.actor == users["reviewer"] and entry.payload["backtest"] == backtest.pk


def test_rejection_needs_a_comment_and_sets_the_state(submit, make_backtest, users, counts):
    proposal = submit()
    backtest = make_backtest(proposal)
    before = counts()
    with pytest.raises(backtest_errors.ReviewRefused, match="comment"):
        approve(backtest, users, verdict="reject", comment="  ")
    assert counts() == before
    approve(backtest, users, verdict="reject", comment="precision drops")
    assert Proposal.objects.get(pk=proposal.pk).state == "rejected"
    assert AuditEntry.objects.filter(action="backtest.rejected").count() == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"status": "running", "decided": False}, "not finished"),
        ({"decided": False}, "no decision"),
        ({"passed": False}, "failed its gates"),
    ],
)
def test_only_a_finished_decided_backtest_may_be_approved(
    submit, make_backtest, users, counts, kwargs, message
):
    backtest = make_backtest(submit(), **kwargs)
    before = counts()
    with pytest.raises(backtest_errors.ReviewRefused, match=message):
        approve(backtest, users)
    assert counts() == before


def test_a_backtest_is_reviewed_once_and_only_the_latest(submit, make_backtest, users, counts):
    proposal = submit()
    old = make_backtest(proposal)
    approve(old, users)
    with pytest.raises(backtest_errors.ReviewRefused, match="already reviewed"):
        approve(old, users)
    newer = make_backtest(proposal)
    older_unreviewed = make_backtest(proposal, digest="x")
    assert older_unreviewed.pk > newer.pk  # created last, so it is the latest
    with pytest.raises(backtest_errors.ReviewRefused, match="not the proposal's latest"):
        approve(newer, users)


@pytest.mark.parametrize("role", ["lead", "auditor", "outsider", "root"])
def test_only_a_reviewer_may_review(submit, make_backtest, users, counts, role):
    backtest = make_backtest(submit())
    before = counts()
    with pytest.raises(AccessDenied):
        review_services.backtest_review(
            backtest=backtest, reviewer=users[role], verdict="approve", comment=""
        )
    assert counts() == before


def test_promotion_makes_the_version_current_and_keeps_history(project, ready, users):
    promotion = promotions.proposal_promote(proposal=ready, lead=users["lead"])
    assert (promotion.sequence, promotion.frame_version, promotion.promoted_by) == (
        2,
        ready.frame_version,
        users["lead"],
    )
    assert selectors.current_frame_version(project=project) == ready.frame_version
    assert Proposal.objects.get(pk=ready.pk).state == "promoted"
    assert list(
        Promotion.objects.filter(project=project).values_list("frame_version__number", flat=True)
    ) == [1, 2]
    assert FrameVersion.objects.filter(project=project).count() == 2
    entry = AuditEntry.objects.filter(action="proposal.promoted").get()
    assert entry.payload == {
        "proposal": ready.pk,
        "frame_version": 2,
        "previous_version": 1,
        "sequence": 2,
    }
    with pytest.raises(proposal_errors.PromotionRefused, match="already promoted"):
        promotions.proposal_promote(proposal=ready, lead=users["lead"])


@pytest.mark.parametrize("role", ["reviewer", "auditor", "outsider", "root"])
def test_only_a_lead_may_promote(ready, users, counts, role):
    before = counts()
    with pytest.raises(AccessDenied):
        promotions.proposal_promote(proposal=ready, lead=users[role])
    assert counts() == before


def _refused(proposal, users, counts, match):
    before = counts()
    with pytest.raises(proposal_errors.PromotionRefused, match=match):
        promotions.proposal_promote(proposal=proposal, lead=users["lead"])
    assert counts() == before
    assert Proposal.objects.get(pk=proposal.pk).state != "promoted"


def test_promotion_needs_a_backtest(submit, users, counts):
    _refused(submit(), users, counts, "no backtest has run")


def test_promotion_needs_a_passed_backtest(submit, make_backtest, users, counts):
    proposal = submit()
    approve(make_backtest(proposal, passed=False), users, verdict="reject", comment="no")
    _refused(proposal, users, counts, "failed its gates")


def test_promotion_needs_an_approval(submit, make_backtest, users, counts):
    proposal = submit()
    make_backtest(proposal)
    _refused(proposal, users, counts, "has not been reviewed")


def test_promotion_refuses_a_rejected_backtest(submit, make_backtest, users, counts):
    proposal = submit()
    approve(
        make_backtest(proposal), users, verdict="reject", comment="precision drops on arch-review"
    )
    _refused(proposal, users, counts, "rejected")


def test_a_newer_backtest_without_approval_blocks_promotion(ready, make_backtest, users, counts):
    make_backtest(ready)  # passed, but nobody reviewed this one
    _refused(ready, users, counts, "has not been reviewed")


def test_an_approval_under_another_engine_blocks_promotion(ready, users, counts, monkeypatch):
    monkeypatch.setattr(backtest_selectors, "current_engine_version", lambda: "engine-2")
    _refused(ready, users, counts, "engine is engine-2 now")


def test_an_approval_bound_to_another_task_set_blocks_promotion(
    submit, make_backtest, users, counts
):
    proposal = submit()
    backtest = make_backtest(proposal, digest="tasks-1")
    # an approval row whose binding does not match its backtest (written around the service)
    Approval.objects.create(
        backtest=backtest,
        frame_version=proposal.frame_version,
        task_set_digest="tasks-0",
        engine_version=backtest.engine_version,
        reviewer=users["reviewer"],
        verdict="approve",
        comment="",
    )
    _refused(proposal, users, counts, "another task set")


def test_a_changed_task_set_blocks_promotion(ready, users, counts, monkeypatch):
    monkeypatch.setattr(backtest_selectors, "current_task_set_digest", lambda project: "tasks-now")
    _refused(ready, users, counts, "task set changed")


def test_a_proposal_over_a_superseded_base_is_refused(submit, make_backtest, users, counts):
    first, second = submit(), submit({"class_pull": 4})
    for proposal in (first, second):
        approve(make_backtest(proposal), users)
    promotions.proposal_promote(proposal=first, lead=users["lead"])
    # promoting the second would silently undo the first: it must be resubmitted over v2
    _refused(Proposal.objects.get(pk=second.pk), users, counts, "v2 is current now")


def test_a_lost_sequence_race_is_a_clear_error_and_writes_nothing(
    project, ready, users, counts, monkeypatch
):
    # both attempts passed the checks; the other one committed sequence 2 first
    monkeypatch.setattr(authority_services, "next_promotion_sequence", lambda project: 1)
    before = counts()
    with pytest.raises(proposal_errors.PromotionConflict, match="another promotion"):
        promotions.proposal_promote(proposal=ready, lead=users["lead"])
    assert counts() == before
    assert Proposal.objects.get(pk=ready.pk).state == "approved"


def test_the_audit_row_shares_the_promotion_transaction(ready, users, counts, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("audit store down")

    monkeypatch.setattr(promotions, "audit_record", broken)
    before = counts()
    with pytest.raises(RuntimeError):
        promotions.proposal_promote(proposal=ready, lead=users["lead"])
    assert counts() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("same_proposal", [True, False])
def test_two_concurrent_promotions_exactly_one_wins(
    project, submit, make_backtest, users, same_proposal
):
    proposals = [submit()] if same_proposal else [submit(), submit({"class_pull": 4})]
    for proposal in proposals:
        approve(make_backtest(proposal), users)
    targets = proposals * 2 if same_proposal else proposals
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def attempt(proposal):
        try:
            barrier.wait(timeout=10)
            outcomes.append(promotions.proposal_promote(proposal=proposal, lead=users["lead"]))
        except proposal_errors.PromotionRefused as error:
            outcomes.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(p,)) for p in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(outcomes) == 2
    assert sum(isinstance(o, Promotion) for o in outcomes) == 1
    assert sum(isinstance(o, proposal_errors.PromotionRefused) for o in outcomes) == 1
    assert list(Promotion.objects.filter(project=project).values_list("sequence", flat=True)) == [
        1,
        2,
    ]
    assert AuditEntry.objects.filter(action="proposal.promoted").count() == 1


def test_sync_state_follows_the_latest_backtest_review_and_promotion(submit, make_backtest, users):
    proposal = submit()

    def state():
        return services.proposal_sync_state(proposal=Proposal.objects.get(pk=proposal.pk)).state

    assert state() == "proposed"
    make_backtest(proposal, status="running", decided=False)
    assert state() == "backtesting"
    make_backtest(proposal, passed=False)
    assert state() == "failed"
    latest = make_backtest(proposal)
    assert state() == "passed"
    approve(latest, users)
    assert state() == "approved"
    make_backtest(proposal, status="error", decided=False)
    assert state() == "proposed"
    approve(make_backtest(proposal), users)
    promotions.proposal_promote(proposal=Proposal.objects.get(pk=proposal.pk), lead=users["lead"])
    assert state() == "promoted"
