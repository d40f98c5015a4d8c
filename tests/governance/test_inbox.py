"""Home is an inbox per role: what waits for a reviewer, a lead and an auditor; only the
sections a role can act on are shown."""

from __future__ import annotations

import pytest
from django.urls import reverse

from authority.selectors import current_frame_version
from governance.models import Proposal

pytestmark = pytest.mark.django_db


def _section(html: str, section_id: str) -> str:
    part = html[html.index(f'id="{section_id}"') :]
    return part[: part.index("</section>")]


def _state(proposal, state: str):
    # the proposal's state is the read model of its backtests and reviews; set it as they would
    Proposal.objects.filter(pk=proposal.pk).update(state=state)


def test_a_reviewer_sees_what_awaits_their_verdict(client, users, submit):
    passed = submit(title="Passed its gates")
    _state(passed, "passed")
    approved = submit(title="Already approved", patch={"class_pull": 4})
    _state(approved, "approved")
    client.force_login(users["reviewer"])
    html = client.get(reverse("home")).content.decode()
    review = _section(html, "inbox-review")
    assert f'data-proposal="{passed.pk}"' in review and "approve or reject" in review
    assert f'data-proposal="{approved.pk}"' not in review
    assert 'id="inbox-promote"' not in html and 'id="inbox-attention"' not in html


def test_a_lead_sees_what_to_promote_and_what_needs_attention(client, users, submit, project, lead_promotes):
    approved = submit(title="Approved")
    _state(approved, "approved")
    failed = submit(title="Failed", patch={"class_pull": 4})
    _state(failed, "failed")
    client.force_login(users["lead"])
    html = client.get(reverse("home")).content.decode()
    assert f'data-proposal="{approved.pk}"' in _section(html, "inbox-promote")
    attention = _section(html, "inbox-attention")
    assert f'data-proposal="{failed.pk}"' in attention and "failed: revise" in attention
    assert 'id="inbox-review"' not in html

    # once another version is promoted, the approved one is stale: it moves to attention
    promoted = lead_promotes(project)
    html = client.get(reverse("home")).content.decode()
    attention = _section(html, "inbox-attention")
    assert f'data-proposal="{approved.pk}"' in attention and "stale" in attention
    assert f'data-proposal="{approved.pk}"' not in _section(html, "inbox-promote")
    assert f"<code>alpha</code> v{promoted.number}</a>" in _section(html, "inbox-promotions")


def test_an_auditor_sees_recent_activity_and_a_search_box(client, users, submit):
    submit(title="Something happened")
    client.force_login(users["auditor"])
    html = client.get(reverse("home")).content.decode()
    activity = _section(html, "inbox-activity")
    assert "proposal.submitted" in activity and 'name="actor"' in activity
    assert 'id="inbox-review"' not in html and 'id="inbox-promote"' not in html
    # and the auditor is offered no "propose" tab on the project's pages
    assert reverse("proposal-create", args=["alpha"]) not in client.get(
        reverse("project-detail", args=["alpha"])
    ).content.decode()


@pytest.fixture
def lead_promotes():
    """Promote a fresh version of the project's frame, as a promotion would (straight through the
    models: these tests are about the inbox, not about promotion)."""
    from authority.models import FrameVersion, Promotion

    def promote(project):
        current = current_frame_version(project=project)
        version = FrameVersion.objects.create(
            project=project,
            number=FrameVersion.objects.filter(project=project).order_by("-number").first().number + 1,
            snapshot={**current.snapshot, "class_pull": 7},
            author_label="lead",
            origin="proposal",
            parent=current,
        )
        sequence = Promotion.objects.filter(project=project).count() + 1
        Promotion.objects.create(project=project, frame_version=version, sequence=sequence)
        return version

    return promote
