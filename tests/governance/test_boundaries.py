"""Per-project boundaries: who sees which project, who may widen a scope, audited role changes."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.access import AccessDenied
from authority.models import AuditEntry, RoleGrant
from authority.services import role_grant, role_revoke
from governance.proposals import errors as proposal_errors
from selection.models import Project


def listed(client, user) -> list[str]:
    client.force_login(user)
    html = client.get(reverse("home")).content.decode()
    return [slug for slug in ("alpha", "beta") if f'href="{reverse("project-detail", args=[slug])}"' in html]


def test_the_landing_page_lists_only_projects_the_user_holds_a_role_in(client, users, project):
    assert listed(client, users["lead"]) == ["alpha"]
    assert listed(client, users["outsider"]) == []
    assert listed(client, users["root"]) == ["alpha", "beta"]  # a superuser reads every project


def test_a_lead_cannot_widen_the_scope_to_a_project_they_hold_no_role_in(submit, users, counts, project):
    before = counts()
    with pytest.raises(proposal_errors.ProposalInvalid, match='lead holds no role in project "beta"'):
        submit({"scope": ["alpha", "beta"]})
    assert counts() == before
    role_grant(user=users["lead"], project=Project.objects.get(slug="beta"), role="auditor")
    proposal = submit({"scope": ["alpha", "beta"]})
    assert proposal.frame_version.snapshot["scope"] == ["alpha", "beta"]


def test_a_proposal_that_widens_the_scope_is_flagged_on_its_page(client, submit, users):
    role_grant(user=users["lead"], project=Project.objects.get(slug="beta"), role="reviewer")
    widening = submit({"scope": ["alpha", "beta"]})
    narrow = submit({"class_pull": 5}, title="Pull five")
    client.force_login(users["auditor"])
    page = client.get(reverse("proposal-detail", args=[widening.pk])).content.decode()
    assert "This proposal widens the scope" in page and "<strong>beta</strong>" in page
    assert "measures leakage against v1" in page
    assert "widens the scope" not in client.get(reverse("proposal-detail", args=[narrow.pk])).content.decode()


def test_role_grants_and_revocations_are_audited(users, project):
    beta = Project.objects.get(slug="beta")
    role_grant(user=users["outsider"], project=project, role="auditor", actor=users["lead"])
    role_grant(user=users["outsider"], project=project, role="auditor", actor=users["lead"])  # idempotent
    assert role_revoke(user=users["outsider"], project=project, role="auditor", actor=users["lead"])
    assert not role_revoke(user=users["outsider"], project=project, role="auditor", actor=users["lead"])
    entries = list(AuditEntry.objects.filter(action__startswith="role.").order_by("id"))
    assert [(e.action, e.actor, e.payload) for e in entries] == [
        ("role.granted", users["lead"], {"user": "outsider", "role": "auditor"}),
        ("role.revoked", users["lead"], {"user": "outsider", "role": "auditor"}),
    ]
    # only a lead of the project (or the system) changes its roles
    with pytest.raises(AccessDenied):
        role_grant(user=users["outsider"], project=beta, role="lead", actor=users["lead"])
    with pytest.raises(AccessDenied):
        role_grant(user=users["outsider"], project=project, role="lead", actor=users["reviewer"])
    assert not RoleGrant.objects.filter(user=users["outsider"]).exists()


def test_an_empty_scope_is_refused_not_read_as_everything(submit, counts):
    before = counts()
    with pytest.raises(proposal_errors.ProposalInvalid, match="an empty scope would admit no unit at all"):
        submit({"scope": []})
    with pytest.raises(proposal_errors.ProposalInvalid, match='project "nowhere" is not declared'):
        submit({"scope": ["nowhere"]})
    assert counts() == before
