"""proposal_submit: a new immutable version over the current one, validated, audited, queued."""

from __future__ import annotations

import pytest

from authority.access import AccessDenied
from authority.models import AuditEntry, FrameVersion
from authority.selectors import current_frame_version
from governance.models import Proposal
from governance.proposals import errors as proposal_errors
from governance.proposals import services


def test_submit_stores_a_new_version_over_the_current_one(project, users, submit, counts):
    proposal = submit(
        {"work_types": {"implementation-review": ["rule", "decision"]}, "class_pull": None}
    )
    version = proposal.frame_version
    assert (version.number, version.parent.number, version.origin, version.author_label) == (
        2,
        1,
        "proposal",
        "lead",
    )
    assert version.snapshot["work_types"]["implementation-review"] == ["rule", "decision"]
    assert "class_pull" not in version.snapshot
    assert version.snapshot["x-note"] == "kept through every patch"
    assert (
        proposal.state == "proposed"
        and proposal.base_version.number == 1
        and proposal.warnings == []
    )
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.actor, entry.project, entry.object_id) == (
        "proposal.submitted",
        users["lead"],
        project,
        str(proposal.pk),
    )
    assert entry.payload["patch"] == proposal.patch
    # the current (promoted) version did not move
    assert current_frame_version(project=project).number == 1
    assert submit().frame_version.number == 3


@pytest.mark.parametrize(
    "patch, where",
    [
        (
            {"work_types": {"implementation-review": ["decision", "rule", "Decision"]}},
            "work_types.implementation-review[2]",
        ),
        ({"colour": "blue"}, "colour"),
        ({"class_pull": -2}, "class_pull"),
        ({"gates": {"limits": [{"metric": "recall", "max": 1}]}}, "gates.limits[0].metric"),
        ({"scope": ["gamma"]}, "scope[0]"),
        (["not", "a", "mapping"], "patch"),
        ({"purpose": "Test frame"}, "patch"),  # changes nothing
    ],
)
def test_invalid_proposals_name_the_field_and_write_nothing(submit, counts, patch, where):
    before = counts()
    with pytest.raises(proposal_errors.ProposalInvalid) as caught:
        submit(patch)
    assert [issue.where for issue in caught.value.issues] == [where]
    assert where in str(caught.value)
    assert counts() == before


def test_a_class_no_unit_carries_is_a_warning_not_an_error(submit):
    proposal = submit(
        {"work_types": {"implementation-review": ["decision", "measurement-contract"]}}
    )
    assert proposal.warnings == [
        "work_types.implementation-review[1]: no unit in scope (alpha) carries the class "
        '"measurement-contract"'
    ]
    assert Proposal.objects.get(pk=proposal.pk).warnings == proposal.warnings


@pytest.mark.parametrize("role", ["reviewer", "auditor", "outsider", "root"])
def test_only_a_lead_may_propose(users, submit, counts, role):
    before = counts()
    with pytest.raises(AccessDenied):
        submit(author=users[role])
    assert counts() == before


def test_a_lead_of_another_project_may_not_propose_here(make_project, users, submit, grant, counts):
    from selection.models import Project

    grant(users["reviewer"], Project.objects.get(slug="beta"), "lead")
    before = counts()
    with pytest.raises(AccessDenied):
        submit(author=users["reviewer"])
    assert counts() == before


def test_the_audit_row_shares_the_transaction(submit, counts, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("audit store down")

    monkeypatch.setattr(services, "audit_record", broken)
    before = counts()
    with pytest.raises(RuntimeError):
        submit()
    assert counts() == before


def test_a_stale_base_is_refused(project, submit, counts):
    stale = FrameVersion.objects.get(project=project, number=1)
    submit()
    from authority.models import Promotion

    Promotion.objects.create(
        project=project, frame_version=FrameVersion.objects.get(number=2), sequence=2
    )
    before = counts()
    with pytest.raises(proposal_errors.ProposalInvalid, match="was promoted since"):
        submit(expected_base=stale)
    assert counts() == before
