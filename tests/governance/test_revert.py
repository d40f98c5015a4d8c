"""The emergency revert: a lead asks with a reason, a second person (another lead or a reviewer)
confirms, the restored version is current at once and both steps are audited; the backtest follows."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.access import AccessDenied
from authority.models import AuditEntry, RoleGrant
from authority.selectors import current_frame_version
from governance.proposals import revert
from governance.proposals.errors import PromotionRefused, ProposalInvalid
from tests.backtest.conftest import proposal

pytestmark = pytest.mark.django_db


def test_a_lead_restores_a_promoted_version_at_once_with_a_second_persons_confirmation(
    sift, sift_users, promoted_v2, django_capture_on_commit_callbacks, client
):
    v1 = promoted_v2.parent
    lead, reviewer = sift_users["lead"], sift_users["reviewer"]
    with pytest.raises(ProposalInvalid, match="needs a reason"):
        revert.revert_request(lead=lead, project=sift, to_version=v1, reason=" ")
    with pytest.raises(AccessDenied):
        revert.revert_request(lead=reviewer, project=sift, to_version=v1, reason="incident")
    with django_capture_on_commit_callbacks(execute=False):
        rollback = revert.revert_request(lead=lead, project=sift, to_version=v1, reason="recall fell in production")
    assert current_frame_version(project=sift) == promoted_v2  # nothing lands on one person's word
    with pytest.raises(PromotionRefused, match="another lead or reviewer confirms it"):
        revert.revert_confirm(proposal=rollback, confirmer=lead)
    with pytest.raises(AccessDenied):
        revert.revert_confirm(proposal=rollback, confirmer=sift_users["auditor"])
    client.force_login(reviewer)
    page = client.get(reverse("proposal-detail", args=[rollback.pk])).content.decode()
    assert "recall fell in production" in page and 'id="revert-confirm"' in page
    assert not rollback.backtests.exists()  # the backtest follows the restore, not the request
    with django_capture_on_commit_callbacks(execute=True):
        revert.revert_confirm(proposal=rollback, confirmer=reviewer)
    after = rollback.backtests.get()  # started once the restore committed, against the version it replaced
    assert after.baseline_version == promoted_v2 and after.gates["standard"]["name"] == "non_inferiority"
    current = current_frame_version(project=sift)
    assert current.pk == rollback.frame_version_id and current.snapshot == v1.snapshot
    rollback.refresh_from_db()
    assert rollback.state == "promoted"
    done = AuditEntry.objects.get(action="proposal.reverted")
    assert done.actor == reviewer and done.payload["requested_by"] == "lead"
    assert done.payload["reason"] == "recall fell in production" and done.payload["restores"] == v1.number
    assert AuditEntry.objects.filter(action="proposal.revert_requested", actor=lead).count() == 1
    with pytest.raises(PromotionRefused):
        revert.revert_confirm(proposal=rollback, confirmer=reviewer)  # once only


def test_a_version_never_in_force_cannot_be_restored_at_once(sift, sift_users, promoted_v2):
    unpromoted = proposal("all-three").frame_version
    with pytest.raises(ProposalInvalid, match="never in force"):
        revert.revert_request(lead=sift_users["lead"], project=sift, to_version=unpromoted, reason="x")


def test_another_lead_may_confirm(sift, sift_users, promoted_v2, django_user_model, django_capture_on_commit_callbacks):
    second = django_user_model.objects.create_user("second-lead", password="pw")
    RoleGrant.objects.create(user=second, project=sift, role="lead")
    with django_capture_on_commit_callbacks(execute=False):
        rollback = revert.revert_request(
            lead=sift_users["lead"], project=sift, to_version=promoted_v2.parent, reason="incident"
        )
    revert.revert_confirm(proposal=rollback, confirmer=second)
    assert current_frame_version(project=sift).pk == rollback.frame_version_id
