"""Rebase, close and rollback, and conflicts between open proposals.

A submitted proposal never changes: a rebase is a new proposal that supersedes the stale one, with
its own backtest, so none of the old one's approvals carry over.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from authority import errors as authority_errors
from authority.access import AccessDenied
from authority.models import AuditEntry
from authority.selectors import current_frame_version
from backtest import errors as backtest_errors
from backtest import services as backtest_services
from backtest.models import Approval
from backtest.review import services as review_services
from governance.models import Proposal, ProposalClosure
from governance.proposals import errors as proposal_errors
from governance.proposals import promotion, services
from governance.proposals import selectors as proposal_selectors
from rules import frame_patch as frames
from tests.api.conftest import ApiClient, assert_problem

pytestmark = pytest.mark.django_db

RULES_FIRST = {"work_types": {"implementation-review": ["rule", "decision"]}}
RESULTS_FIRST = {"work_types": {"implementation-review": ["result", "decision", "rule"]}}
PULL = {"class_pull": 5}


@pytest.fixture
def promote(make_backtest, users):
    """Promote a proposal the way a lead does: a passed backtest, a reviewer's approval, then the
    one promotion service."""

    def run(proposal):
        backtest = make_backtest(proposal)
        review_services.backtest_review(backtest=backtest, reviewer=users["reviewer"], verdict="approve",
                                          comment="fine")
        return promotion.proposal_promote(proposal=Proposal.objects.get(pk=proposal.pk), lead=users["lead"])

    return run


def _fresh(proposal) -> Proposal:
    return Proposal.objects.select_related("base_version", "frame_version", "project").get(pk=proposal.pk)


# --- the pure part: which keys conflict, how a resolution shapes the patch ------------------------


def test_a_key_the_current_version_changed_since_the_base_conflicts():
    base = {"class_pull": 3, "work_types": {"a": ["x"], "b": ["y"]}}
    current = {"class_pull": 4, "work_types": {"a": ["x", "z"], "b": ["y"]}}
    patch = {"class_pull": 4, "work_types": {"a": ["z"], "b": ["y", "x"]}}
    conflicts = frames.rebase_conflicts(base, current, patch)
    # class_pull moved to the very value the patch gives it: no conflict; work_types.b never moved
    assert [c.key for c in conflicts] == ["work_types.a"]
    assert (conflicts[0].base, conflicts[0].current, conflicts[0].proposed) == ('["x"]', '["x", "z"]', '["z"]')
    kept, unresolved = frames.resolve_rebase(patch, conflicts, {"work_types.a": "mine"})
    assert kept == patch and not unresolved
    dropped, _ = frames.resolve_rebase(patch, conflicts, {"work_types.a": "theirs"})
    assert dropped == {"class_pull": 4, "work_types": {"b": ["y", "x"]}}
    _, unresolved = frames.resolve_rebase(patch, conflicts, {"work_types.a": "both"})
    assert [c.key for c in unresolved] == ["work_types.a"]


# --- rebase ----------------------------------------------------------------------------------------


def test_a_stale_proposal_rebases_cleanly_as_a_new_proposal_that_supersedes_it(
    submit, users, promote, make_backtest
):
    stale = submit(patch=RULES_FIRST, title="Rules first")
    # a reviewer had approved the stale one: that approval must not follow the change
    review_services.backtest_review(
        backtest=make_backtest(stale), reviewer=users["reviewer"], verdict="approve", comment="ok"
    )
    landed = promote(submit(patch=PULL, title="More pull"))
    current = landed.frame_version
    current_now = proposal_selectors.current_with_proposal(project=stale.project)
    assert proposal_selectors.stale_reason(_fresh(stale), current=current_now) == (
        f'v{current.number} was promoted from proposal #{landed.frame_version.proposal.pk} "More pull" after it '
        "was written over v1; no key it changes moved to another value, so it rebases cleanly"
    )

    rebased = services.proposal_rebase(proposal=stale, author=users["lead"])

    assert (rebased.kind, rebased.supersedes_id, rebased.base_version_id) == ("rebase", stale.pk, current.pk)
    assert rebased.patch == RULES_FIRST and rebased.title == "Rules first"
    assert rebased.frame_version.snapshot["class_pull"] == 5  # the promoted change stays
    assert rebased.frame_version.snapshot["work_types"]["implementation-review"] == ["rule", "decision"]
    assert not rebased.backtests.exists() and not Approval.objects.filter(backtest__proposal=rebased).exists()
    old = _fresh(stale)
    assert old.state == "closed"
    assert old.closure.superseded_by_id == rebased.pk and f"as proposal #{rebased.pk}" in old.closure.reason
    assert proposal_selectors.promotion_blockers(proposal=old) == ["this proposal is closed"]
    actions = list(AuditEntry.objects.filter(action__startswith="proposal.").values_list("action", flat=True))
    assert {"proposal.rebased", "proposal.closed", "proposal.stale"} <= set(actions)
    # the old one is done: nothing more can start on it
    with pytest.raises(backtest_errors.BacktestRefused, match="closed"):
        backtest_services.backtest_enqueue(proposal=old, requested_by=users["lead"])
    with pytest.raises(authority_errors.GovernanceError, match="closed"):
        services.proposal_rebase(proposal=old, author=users["lead"])


def test_a_conflict_is_shown_and_must_be_resolved_per_key(submit, users, promote, counts):
    stale = submit(patch=RULES_FIRST, title="Rules first")
    promote(submit(patch=RESULTS_FIRST, title="Results first"))

    before = counts()
    with pytest.raises(proposal_errors.RebaseConflict) as refused:
        services.proposal_rebase(proposal=stale, author=users["lead"])
    assert [c.key for c in refused.value.conflicts] == ["work_types.implementation-review"]
    assert "v3 also changed work_types.implementation-review" in str(refused.value)
    assert counts() == before  # nothing written

    # keeping the current value leaves nothing to change: said, and still nothing written
    with pytest.raises(proposal_errors.ProposalInvalid, match="already holds everything"):
        services.proposal_rebase(
            proposal=stale, author=users["lead"], resolutions={"work_types.implementation-review": "theirs"}
        )
    assert counts() == before

    rebased = services.proposal_rebase(
        proposal=stale, author=users["lead"], resolutions={"work_types.implementation-review": "mine"}
    )
    assert rebased.frame_version.snapshot["work_types"]["implementation-review"] == ["rule", "decision"]
    assert "work_types.implementation-review → mine" in rebased.rationale
    entry = AuditEntry.objects.get(action="proposal.rebased")
    assert entry.payload["resolutions"] == {"work_types.implementation-review": "mine"}


def test_only_a_lead_rebases_and_a_current_proposal_has_nothing_to_rebase(submit, users):
    proposal = submit()
    with pytest.raises(AccessDenied):
        services.proposal_rebase(proposal=proposal, author=users["reviewer"])
    with pytest.raises(authority_errors.GovernanceError, match="nothing to rebase"):
        services.proposal_rebase(proposal=proposal, author=users["lead"])


def test_the_link_between_proposals_is_as_immutable_as_the_rest(submit, users, promote):
    stale = submit(patch=RULES_FIRST)
    promote(submit(patch=PULL))
    rebased = services.proposal_rebase(proposal=stale, author=users["lead"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Proposal.objects.filter(pk=rebased.pk).update(supersedes=None)
    with pytest.raises(IntegrityError), transaction.atomic():
        ProposalClosure.objects.filter(proposal=stale).update(reason="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        ProposalClosure.objects.filter(proposal=stale).delete()


# --- close -----------------------------------------------------------------------------------------


def test_a_lead_closes_an_open_proposal_with_a_reason(submit, users, counts):
    proposal = submit()
    before = counts()
    with pytest.raises(proposal_errors.ProposalInvalid, match="needs a reason"):
        services.proposal_close(proposal=proposal, lead=users["lead"], reason="  ")
    for who in ("reviewer", "auditor"):
        with pytest.raises(AccessDenied):
            services.proposal_close(proposal=proposal, lead=users[who], reason="no")
    assert counts() == before
    services.proposal_close(proposal=proposal, lead=users["lead"], reason="superseded by the new taxonomy")
    closed = _fresh(proposal)
    assert closed.state == "closed" and closed.closure.reason == "superseded by the new taxonomy"
    entry = AuditEntry.objects.get(action="proposal.closed")
    assert entry.actor == users["lead"] and entry.payload["reason"] == "superseded by the new taxonomy"
    with pytest.raises(authority_errors.GovernanceError, match="is closed"):
        services.proposal_close(proposal=closed, lead=users["lead"], reason="again")


# --- rollback --------------------------------------------------------------------------------------


def test_a_rollback_is_one_action_that_proposes_the_earlier_frame(submit, users, promote, counts, project):
    v1 = current_frame_version(project=project)
    promote(submit(patch=PULL))
    rollback = promotion.proposal_rollback(project=v1.project, author=users["lead"], to_version=v1)
    assert (rollback.kind, rollback.restores_id, rollback.title) == ("rollback", v1.pk, "Roll back to v1")
    assert rollback.patch == {"class_pull": 3}
    assert rollback.frame_version.snapshot == v1.snapshot
    assert rollback.state == "proposed"  # backtested and reviewed like any other before it lands
    before = counts()
    current = current_frame_version(project=v1.project)
    with pytest.raises(proposal_errors.ProposalInvalid, match="is the current version already"):
        promotion.proposal_rollback(project=v1.project, author=users["lead"], to_version=current)
    with pytest.raises(AccessDenied):
        promotion.proposal_rollback(project=v1.project, author=users["reviewer"], to_version=v1)
    assert counts() == before


# --- conflicts between open proposals ---------------------------------------------------------------


def test_open_proposals_touching_the_same_keys_are_shown_and_promotion_makes_the_others_stale(
    client, submit, users, promote
):
    first = submit(patch=RULES_FIRST, title="Rules first")
    second = submit(patch=RESULTS_FIRST, title="Results first")
    apart = submit(patch=PULL, title="More pull")
    found = proposal_selectors.open_conflicts(proposal_selectors.open_proposals(project=first.project))
    assert [(c.proposal.pk, c.keys) for c in found[first.pk]] == [(second.pk, ("work_types.implementation-review",))]
    assert apart.pk not in found

    client.force_login(users["lead"])
    listing = client.get(reverse("proposal-list", args=["alpha"])).content.decode()
    row = listing[listing.index(f'data-proposal="{first.pk}"'):]
    row = row[: row.index("</tr>")]
    assert f"#{second.pk}" in row and "work_types.implementation-review" in row
    page = client.get(reverse("proposal-detail", args=[first.pk])).content.decode()
    assert 'id="open-conflicts"' in page and f"#{second.pk} Results first" in page

    promote(second)
    stale = AuditEntry.objects.filter(action="proposal.stale")
    assert {e.payload["proposal"] for e in stale} == {first.pk, apart.pk}
    assert "also changed work_types.implementation-review" in stale.get(payload__proposal=first.pk).summary
    listing = client.get(reverse("proposal-list", args=["alpha"])).content.decode()
    row = listing[listing.index(f'data-proposal="{first.pk}"'):]
    assert "⚠ stale" in row[: row.index("</tr>")] and "also changed work_types.implementation-review" in row


# --- pages and API call the same services -----------------------------------------------------------


def test_the_page_resolves_a_conflict_per_key_then_resubmits(client, submit, users, promote):
    stale = submit(patch=RULES_FIRST, title="Rules first")
    promote(submit(patch=RESULTS_FIRST, title="Results first"))
    client.force_login(users["lead"])
    page = client.get(reverse("proposal-detail", args=[stale.pk])).content.decode()
    assert 'id="rebase-conflicts"' in page and 'name="resolve:work_types.implementation-review"' in page

    refused = client.post(reverse("proposal-resubmit", args=[stale.pk]), follow=True).content.decode()
    assert "Not rebased: v3 also changed work_types.implementation-review" in refused
    assert not Proposal.objects.filter(supersedes=stale).exists()

    response = client.post(
        reverse("proposal-resubmit", args=[stale.pk]), {"resolve:work_types.implementation-review": "mine"}
    )
    rebased = Proposal.objects.get(supersedes=stale)
    assert response["Location"] == reverse("proposal-detail", args=[rebased.pk])
    old = client.get(reverse("proposal-detail", args=[stale.pk])).content.decode()
    assert 'id="closure-reason"' in old and f'id="superseded-by">proposal #{rebased.pk}' in old


def test_the_pages_close_and_roll_back(client, submit, users, promote, project):
    open_one = submit(patch=RULES_FIRST)
    promote(submit(patch=PULL))
    client.force_login(users["lead"])
    client.post(reverse("proposal-close", args=[open_one.pk]), {"reason": ""})
    assert _fresh(open_one).state != "closed"
    client.post(reverse("proposal-close", args=[open_one.pk]), {"reason": "not needed any more"})
    assert _fresh(open_one).state == "closed"

    html = client.get(reverse("project-detail", args=["alpha"])).content.decode()
    assert 'id="rollback-1"' in html
    response = client.post(reverse("proposal-rollback", args=["alpha"]), {"version": "1"})
    rollback = Proposal.objects.get(kind="rollback")
    assert response["Location"] == reverse("proposal-detail", args=[rollback.pk])
    assert client.post(reverse("proposal-rollback", args=["alpha"]), {"version": "x"}).status_code == 302
    client.force_login(users["reviewer"])
    assert client.post(reverse("proposal-rollback", args=["alpha"]), {"version": "1"}).status_code == 403


@pytest.fixture
def lead_api(client, users, project):
    from governance.tokens import services as tokens

    secret = tokens.token_create(user=users["lead"], name="t", project=project, role="lead", days=30).secret
    return ApiClient(client, secret)


def test_the_api_rebases_closes_and_rolls_back(lead_api, submit, promote, counts):
    stale = submit(patch=RULES_FIRST, title="Rules first")
    promote(submit(patch=RESULTS_FIRST, title="Results first"))
    before = counts()
    doc = assert_problem(lead_api.post(f"/proposals/{stale.pk}/rebase", {}), 409)
    assert doc["conflicts"][0]["key"] == "work_types.implementation-review" and doc["current_version"] == 3
    assert doc["errors"][0]["location"] == ["body", "resolutions", "work_types.implementation-review"]
    assert counts() == before
    assert lead_api.get(f"/proposals/{stale.pk}").json()["stale_reason"].endswith(
        "also changed work_types.implementation-review"
    )
    response = lead_api.post(
        f"/proposals/{stale.pk}/rebase", {"resolutions": {"work_types.implementation-review": "mine"}}
    )
    assert response.status_code == 201, response.content
    rebased = response.json()
    assert (rebased["kind"], rebased["supersedes"], rebased["base_version"]) == ("rebase", stale.pk, 3)
    old = lead_api.get(f"/proposals/{stale.pk}").json()
    assert old["state"] == "closed" and old["superseded_by"] == rebased["id"]

    closed = lead_api.post(f"/proposals/{rebased['id']}/close", {"reason": "done elsewhere"}).json()
    assert closed["state"] == "closed" and closed["closed_reason"] == "done elsewhere"
    assert_problem(lead_api.post(f"/proposals/{rebased['id']}/close", {"reason": "again"}), 409)

    rollback = lead_api.post("/rollbacks", {"project": "alpha", "version": 1})
    assert rollback.status_code == 201, rollback.content
    assert (rollback.json()["kind"], rollback.json()["restores"]) == ("rollback", 1)
    assert_problem(lead_api.post("/rollbacks", {"project": "alpha", "version": 99}), 404)


def test_a_lead_edits_or_splits_a_change_into_a_new_proposal_that_replaces_it(client, submit, users, project):
    from .test_views import form_data

    both = submit(patch={**RULES_FIRST, **PULL}, title="Rules first and more pull")
    client.force_login(users["lead"])
    page = client.get(reverse("proposal-create", args=["alpha"]), {"revises": both.pk}).content.decode()
    assert 'id="revises"' in page and "&quot;class_pull&quot;: 5" in page  # the patch, to edit
    # the split: only the class pull goes on, as a new proposal replacing the old one
    data = form_data(project, title="More pull only", raw_patch='{"class_pull": 5}', revises=str(both.pk))
    response = client.post(reverse("proposal-create", args=["alpha"]), data)
    split = Proposal.objects.get(supersedes=both)
    assert response["Location"] == reverse("proposal-detail", args=[split.pk])
    assert split.patch == PULL and split.kind == "change"
    old = _fresh(both)
    assert old.state == "closed" and old.closure.reason == f"replaced over v1 as proposal #{split.pk}"
    # a closed proposal cannot be revised again
    data["revises"] = str(both.pk)
    response = client.post(reverse("proposal-create", args=["alpha"]), data)
    assert response.status_code == 400 and "is closed: there is nothing to replace" in response.content.decode()


def test_backtests_name_their_task_set_version_and_a_comparison_across_versions_says_so(
    client, submit, users, make_backtest, project
):
    from selection.evaluation.task_sets import task_set_digest
    from selection.models import TaskSetVersion

    proposal = submit()
    first = make_backtest(proposal)
    client.force_login(users["reviewer"])
    page = reverse("proposal-detail", args=[proposal.pk])
    html = client.get(page).content.decode()
    assert "as imported" in html and 'id="task-sets-differ"' not in html
    # the task set changed (as a labelled trace changes it: v1 recorded, v2 the new set)
    for number, digest in ((1, task_set_digest(project=project)), (2, "b" * 64)):
        TaskSetVersion.objects.create(project=project, number=number, digest=digest, tasks=0, reason="test")
    make_backtest(proposal, digest="b" * 64)
    html = client.get(page).content.decode()
    assert 'id="task-sets-differ"' in html and "(v1, v2)" in html
    detail = client.get(reverse("backtest-detail", args=[first.pk])).content.decode()
    assert '<dd id="task-set"><strong>v1</strong>' in detail
