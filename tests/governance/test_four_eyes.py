"""Four eyes as project policy: the author never approves; the frame's `approval` key sets the bar."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from authority.models import FrameVersion, Promotion
from authority.selectors import current_frame_version
from backtest import errors as backtest_errors
from backtest.models import Approval
from backtest.review import selectors as review_selectors
from backtest.review import services as review_services
from governance.models import Proposal
from governance.proposals import errors as proposal_errors
from governance.proposals import promotion, services
from selection.corpus.frames import ApprovalPolicy, approval_policy


@pytest.fixture
def people(users, django_user_model, grant, project):
    """Besides the fixture's users: a lead who also reviews, a second reviewer, a second lead."""
    make = django_user_model.objects.create_user
    both = grant(grant(make("both"), project, "lead"), project, "reviewer")
    return {
        **users,
        "both": both,
        "reviewer2": grant(make("reviewer2"), project, "reviewer"),
        "lead2": grant(make("lead2"), project, "lead"),
    }


@pytest.fixture
def with_policy(project):
    """Promote a frame carrying `approval` (as a merged proposal would have), returns the project."""

    def set_policy(**policy):
        current = current_frame_version(project=project)
        version = FrameVersion.objects.create(
            project=project,
            number=FrameVersion.objects.filter(project=project).count() + 1,
            snapshot={**current.snapshot, "approval": policy},
            parent=current,
            author_label="test",
        )
        sequence = Promotion.objects.filter(project=project).count() + 1
        Promotion.objects.create(project=project, frame_version=version, sequence=sequence)
        return project

    return set_policy


def review(backtest, user, verdict="approve", comment="fine"):
    return review_services.backtest_review(backtest=backtest, reviewer=user, verdict=verdict, comment=comment)


def promote(proposal, lead):
    return promotion.proposal_promote(proposal=Proposal.objects.get(pk=proposal.pk), lead=lead)


# --- services -----------------------------------------------------------------------------------


def test_the_author_cannot_approve_their_own_proposal(submit, make_backtest, people, counts):
    proposal = submit(author=people["both"])
    backtest = make_backtest(proposal)
    before = counts()
    with pytest.raises(backtest_errors.ReviewRefused, match="its author cannot review its backtest"):
        review(backtest, people["both"])
    assert counts() == before
    review(backtest, people["reviewer"])
    assert Proposal.objects.get(pk=proposal.pk).state == "approved"


def test_two_approvals_needed_when_the_policy_says_so(with_policy, submit, make_backtest, people, counts):
    with_policy(required_approvals=2)
    proposal = submit()
    backtest = make_backtest(proposal)
    review(backtest, people["reviewer"])
    assert Proposal.objects.get(pk=proposal.pk).state == "passed"
    with pytest.raises(proposal_errors.PromotionRefused, match="1 of 2 approvals"):
        promote(proposal, people["lead"])
    with pytest.raises(backtest_errors.ReviewRefused, match="already reviewed"):
        review(backtest, people["reviewer"])
    review(backtest, people["reviewer2"])
    assert Proposal.objects.get(pk=proposal.pk).state == "approved"
    promote(proposal, people["lead"])
    assert current_frame_version(project=proposal.project) == proposal.frame_version


def test_a_rejection_blocks_unless_the_policy_lets_approvals_outvote_it(with_policy, submit, make_backtest, people):
    proposal = submit()
    backtest = make_backtest(proposal)
    review(backtest, people["reviewer"], "reject", "precision drops")
    with pytest.raises(backtest_errors.ReviewRefused, match="already reviewed"):
        review(backtest, people["reviewer2"])
    with pytest.raises(proposal_errors.PromotionRefused, match="rejected"):
        promote(proposal, people["lead"])

    with_policy(required_approvals=2, rejection_blocks=False)
    other = submit(title="Same change, new policy")
    backtest = make_backtest(other)
    review(backtest, people["reviewer"], "reject", "precision drops")
    review(backtest, people["reviewer2"])
    assert Proposal.objects.get(pk=other.pk).state == "passed"
    review(backtest, people["both"])
    assert Proposal.objects.get(pk=other.pk).state == "approved"
    promote(other, people["lead"])


def test_an_approver_may_not_promote_when_the_policy_forbids_it(with_policy, submit, make_backtest, people, counts):
    with_policy(approver_may_promote=False)
    proposal = submit()
    review(make_backtest(proposal), people["both"])
    before = counts()
    with pytest.raises(proposal_errors.PromotionRefused, match="another lead to promote"):
        promote(proposal, people["both"])
    assert counts() == before
    promote(proposal, people["lead2"])


def test_a_new_backtest_voids_earlier_approvals(submit, make_backtest, people):
    proposal = submit()
    review(make_backtest(proposal), people["reviewer"])
    assert Proposal.objects.get(pk=proposal.pk).state == "approved"
    make_backtest(proposal)
    services.proposal_sync_state(proposal=proposal)
    assert Proposal.objects.get(pk=proposal.pk).state == "passed"
    with pytest.raises(proposal_errors.PromotionRefused, match="has not been reviewed"):
        promote(proposal, people["lead"])


def test_the_policy_changes_only_through_a_proposal_and_binds_from_its_promotion(submit, make_backtest, people):
    with pytest.raises(proposal_errors.ProposalInvalid, match="approval.required_approvals: must be at least 1"):
        submit({"approval": {"required_approvals": 0}})
    with pytest.raises(proposal_errors.ProposalInvalid, match='unknown key "quorum"'):
        submit({"approval": {"quorum": 2}})
    with pytest.raises(proposal_errors.ProposalInvalid, match="expected true or false"):
        submit({"approval": {"rejection_blocks": "yes"}})
    raise_bar = submit({"approval": {"required_approvals": 2}}, title="Two approvals from now on")
    # the proposal is judged under the policy in force, not the one it brings
    assert review_selectors.project_approval_policy(project=raise_bar.project) == ApprovalPolicy()
    review(make_backtest(raise_bar), people["reviewer"])
    promote(raise_bar, people["lead"])
    assert review_selectors.project_approval_policy(project=raise_bar.project) == ApprovalPolicy(required_approvals=2)
    assert approval_policy({}) == ApprovalPolicy(1, True, True)


# --- pages --------------------------------------------------------------------------------------


def test_the_review_form_refuses_the_author_and_the_page_shows_the_policy(
    client, submit, make_backtest, people, with_policy
):
    with_policy(required_approvals=2)
    proposal = submit(author=people["both"])
    backtest = make_backtest(proposal)
    client.force_login(people["both"])
    page = client.get(reverse("proposal-detail", args=[proposal.pk])).content.decode()
    assert "2 distinct approvals from reviewers other than the author" in page
    assert "its author cannot review its backtest" in page
    response = client.post(
        reverse("proposal-review", args=[proposal.pk]),
        {"backtest": backtest.pk, "verdict": "approve", "comment": ""},
    )
    assert response.status_code == 400
    assert "its author cannot review its backtest" in response.content.decode()
    assert not Approval.objects.exists()

    client.force_login(people["reviewer"])
    client.post(
        reverse("proposal-review", args=[proposal.pk]),
        {"backtest": backtest.pk, "verdict": "approve", "comment": ""},
    )
    page = client.get(reverse("proposal-detail", args=[proposal.pk])).content.decode()
    assert "1 of 2 approvals" in page
    assert "the project&#x27;s policy needs 2 distinct approvals" in page
    live = client.get(reverse("backtest-detail", args=[backtest.pk])).content.decode()
    assert "1 of 2 approvals" in live and "approve</span> by reviewer" in live


def test_an_older_backtests_reviews_are_marked_void(client, submit, make_backtest, people):
    proposal = submit()
    review(make_backtest(proposal), people["reviewer"])
    make_backtest(proposal)
    client.force_login(people["auditor"])
    page = client.get(reverse("proposal-detail", args=[proposal.pk])).content.decode()
    assert "void: a newer backtest replaced this one" in page


# --- commands -----------------------------------------------------------------------------------


def test_the_promote_command_obeys_the_policy(with_policy, submit, make_backtest, people):
    with_policy(approver_may_promote=False)
    proposal = submit()
    review(make_backtest(proposal), people["both"])
    with pytest.raises(CommandError, match="another lead to promote"):
        call_command("promote", str(proposal.pk), "--user", "both", stdout=io.StringIO())
    out = io.StringIO()
    call_command("promote", str(proposal.pk), "--user", "lead2", stdout=out)
    assert "is current" in out.getvalue()


def test_the_propose_command_refuses_a_malformed_policy(project, people, tmp_path):
    path = tmp_path / "patch.json"
    path.write_text(json.dumps({"approval": {"required_approvals": 99}}))
    with pytest.raises(CommandError, match="must be at most 20"):
        call_command(
            "propose",
            "alpha",
            "--title",
            "t",
            "--patch",
            str(path),
            "--user",
            "lead",
            stdout=io.StringIO(),
        )
