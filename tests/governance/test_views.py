"""The pages: every role sees them; a POST by the wrong role is refused (403), writing nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from authority.models import AuditEntry
from authority.selectors import current_frame_version
from backtest.review import services as review_services
from governance.forms import ProposeForm
from governance.models import Proposal


def login(client, user):
    client.force_login(user)
    return client


def shown(project, declared=("alpha", "beta")) -> dict:
    """What the propose page posts for `project` when nobody edits a field."""
    base = current_frame_version(project=project)
    form = ProposeForm(base=base.snapshot, declared=list(declared))
    data = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is None or value is False:
            continue
        data[name] = value
    return data


def form_data(project, **changes):
    """What the propose page posts when the user edits only `changes`."""
    data = shown(project)
    data.update(title="Reorder implementation review", rationale="rules first")
    data.update(changes)
    return data


# --- reading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["lead", "reviewer", "auditor", "root"])
def test_every_role_reads_the_project_page(client, project, users, role):
    response = login(client, users[role]).get(reverse("project-detail", args=["alpha"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="wt-implementation-review"' in html
    # the class-preference table keeps the written order
    row = html.split('id="wt-implementation-review"')[1].split("</tr>")[0]
    assert row.index("decision") < row.index("rule") < row.index("result")
    assert "release-readiness" in html and "precision" in html and "v1" in html


def test_a_user_without_a_role_in_the_project_gets_403(client, project, users):
    for name in ("project-detail", "proposal-list", "proposal-create"):
        assert (
            login(client, users["outsider"]).get(reverse(name, args=["alpha"])).status_code == 403
        )


def test_pages_require_login(client, project):
    response = client.get(reverse("project-detail", args=["alpha"]))
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_version_history_lists_every_version_with_parent(client, project, users, submit):
    submit()
    html = (
        login(client, users["auditor"])
        .get(reverse("project-detail", args=["alpha"]))
        .content.decode()
    )
    history = html.split('id="history"')[1]
    # v2 is a draft: under its proposal, under the promoted v1 it changes
    assert history.index('data-version="1"') < history.index("proposal #") < history.index('data-version="2"')
    assert "diff vs parent" in history


def test_version_history_nests_drafts_under_their_proposals_under_the_promoted_version(
    client, project, users, submit, make_backtest
):
    from backtest.review import services as review_services
    from governance.proposals import promotion

    promoted = submit(title="Prefer rules")  # v2, promoted below
    backtest = make_backtest(promoted)
    review_services.backtest_review(backtest=backtest, reviewer=users["reviewer"], verdict="approve")
    promotion.proposal_promote(proposal=promoted, lead=users["lead"])
    stale = submit({"class_pull": 5}, title="Widen the pull")  # v3 over v2
    html = login(client, users["auditor"]).get(reverse("project-detail", args=["alpha"])).content.decode()
    history = html.split('id="history"')[1].split("</table>")[0]
    groups = history.split('<tbody class="promoted-version">')[1:]
    # promoted versions, newest first, each its own group: v2 (current) then the imported v1
    assert [g.split('data-version="')[1].split('"')[0] for g in groups] == ["2", "1"]
    assert 'class="promoted current"' in groups[0]
    # v3 is a draft of its proposal, nested under v2, which it changes; v1 has nothing under it
    assert f"proposal #{stale.pk}" in groups[0] and 'class="draft" data-version="3"' in groups[0]
    assert "draft-proposal" not in groups[1]
    # the promoted proposal's version is not listed twice as a draft
    assert history.count('data-version="2"') == 1


def test_frame_diff_marks_a_moved_class(client, project, users, submit):
    submit({"work_types": {"implementation-review": ["rule", "decision", "result", "convention"]}})
    response = login(client, users["auditor"]).get(
        reverse("frame-diff", args=["alpha"]) + "?a=1&b=2"
    )
    html = response.content.decode()
    assert response.status_code == 200
    row = html.split("<code>work_types.implementation-review</code>")[1].split("</tr>")[0]
    assert row.count('<li class="mark-moved" title="moved">rule') == 2  # both sides
    assert '<li class="mark-kept" title="kept">decision' in row
    assert '<li class="mark-added" title="added">convention' in row
    assert '<li class="mark-kept" title="kept">result' in row


def test_frame_diff_of_unknown_version_is_404(client, project, users):
    assert (
        login(client, users["lead"])
        .get(reverse("frame-diff", args=["alpha"]) + "?a=1&b=9")
        .status_code
        == 404
    )


# --- proposing ----------------------------------------------------------------------------------


def test_the_structured_editor_submits_only_changed_keys(client, project, users):
    data = form_data(
        project,
        **{
            "wt__implementation-review": "rule\ndecision\nresult",
            "wt_remove__publication-review": "on",
            "new_wt_name": "triage",
            "new_wt_classes": "convention\nmeasurement-contract",
            "confirm_unknown_classes": "on",  # measurement-contract is new on purpose
            "class_pull": "4",
            "limit_1_metric": "leakage",
            "limit_1_max": "0",
        },
    )
    response = login(client, users["lead"]).post(
        reverse("proposal-create", args=["alpha"]), data, follow=True
    )
    proposal = Proposal.objects.get()
    assert proposal.patch == {
        "class_pull": 4,
        "gates": {
            "limits": [{"metric": "precision", "max_drop": 0.02}, {"metric": "leakage", "max": 0}]
        },
        "work_types": {
            "implementation-review": ["rule", "decision", "result"],
            "publication-review": None,
            "triage": ["convention", "measurement-contract"],
        },
    }
    html = response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("proposal-detail", args=[proposal.pk])
    assert (
        "no unit in scope (alpha) carries the class &quot;measurement-contract&quot;" in html
    )  # warning after submit


def test_an_unchanged_form_is_refused_with_a_message(client, project, users, counts):
    before = counts()
    response = login(client, users["lead"]).post(
        reverse("proposal-create", args=["alpha"]), form_data(project)
    )
    assert response.status_code == 400
    assert "the patch changes nothing in v1" in response.content.decode()
    assert counts() == before


def test_validation_errors_appear_next_to_their_field(client, project, users, counts):
    before = counts()
    data = form_data(
        project,
        **{
            "wt__implementation-review": "decision\nrule\nDecision",
            "limit_0_metric": "precision",
            "limit_0_max_drop": "",
        },
    )
    response = login(client, users["lead"]).post(reverse("proposal-create", args=["alpha"]), data)
    html = response.content.decode()
    assert response.status_code == 400
    field = html.split('id="field-wt__implementation-review"')[1].split("</div>")[0]
    assert "work_types.implementation-review[2]: class name &quot;Decision&quot;" in field
    assert "gates.limits[0].metric: a limit needs a bound" in html
    assert counts() == before


def test_raw_patch_applies_after_the_fields(client, project, users):
    data = form_data(project, raw_patch='{"x-owner": "team-a", "class_pull": 7}')
    login(client, users["lead"]).post(reverse("proposal-create", args=["alpha"]), data)
    assert Proposal.objects.get().patch == {"class_pull": 7, "x-owner": "team-a"}


def test_an_auditor_sees_the_form_but_cannot_submit(client, project, users):
    html = (
        login(client, users["auditor"])
        .get(reverse("proposal-create", args=["alpha"]))
        .content.decode()
    )
    assert 'id="read-only"' in html and "disabled" in html


@pytest.mark.parametrize("role", ["auditor", "reviewer", "root"])
def test_propose_post_by_a_non_lead_is_403_and_writes_nothing(client, project, users, counts, role):
    before = counts()
    response = login(client, users[role]).post(
        reverse("proposal-create", args=["alpha"]), form_data(project, class_pull="9")
    )
    assert response.status_code == 403
    assert counts() == before


# --- reviewing and promoting --------------------------------------------------------------------


@pytest.fixture
def tested(submit, make_backtest):
    proposal = submit()
    return proposal, make_backtest(proposal)


@pytest.mark.parametrize("role", ["auditor", "lead", "root", "outsider"])
def test_review_post_by_a_non_reviewer_is_403_and_writes_nothing(
    client, users, counts, tested, role
):
    proposal, backtest = tested
    before = counts()
    response = login(client, users[role]).post(
        reverse("proposal-review", args=[proposal.pk]),
        {"backtest": backtest.pk, "verdict": "approve", "comment": "ok"},
    )
    assert response.status_code == 403
    assert counts() == before


@pytest.mark.parametrize("role", ["auditor", "reviewer", "root", "outsider"])
def test_promote_post_by_a_non_lead_is_403_and_writes_nothing(client, users, counts, tested, role):
    proposal, backtest = tested
    review_services.backtest_review(
        backtest=backtest, reviewer=users["reviewer"], verdict="approve", comment=""
    )
    before = counts()
    response = login(client, users[role]).post(reverse("proposal-promote", args=[proposal.pk]))
    assert response.status_code == 403
    assert counts() == before


def test_review_then_promote_through_the_pages(client, project, users, tested):
    proposal, backtest = tested
    detail = reverse("proposal-detail", args=[proposal.pk])
    html = login(client, users["lead"]).get(detail).content.decode()
    # no promote button while something blocks it: the blockers say what it waits for
    assert "has not been reviewed" in html and 'id="promote-link"' not in html

    response = login(client, users["reviewer"]).post(
        reverse("proposal-review", args=[proposal.pk]),
        {"backtest": backtest.pk, "verdict": "approve", "comment": "fine"},
    )
    assert response.status_code == 302
    assert Proposal.objects.get(pk=proposal.pk).state == "approved"

    html = login(client, users["lead"]).get(detail).content.decode()
    assert "Promotion is not possible" not in html
    # promotion asks first, on a page with the diff and the gate summary
    confirm = reverse("proposal-promote-confirm", args=[proposal.pk])
    assert f'href="{confirm}"' in html
    page = client.get(confirm).content.decode()
    assert 'id="gate-summary"' in page and 'id="confirm-promote"' in page and "What changes" in page
    response = client.post(reverse("proposal-promote", args=[proposal.pk]), follow=True)
    assert "v2 is now current for alpha" in response.content.decode()
    assert current_frame_version(project=project).number == 2


def test_a_refused_review_shows_why(client, users, submit, make_backtest):
    proposal = submit()
    backtest = make_backtest(proposal, passed=False)
    response = login(client, users["reviewer"]).post(
        reverse("proposal-review", args=[proposal.pk]),
        {"backtest": backtest.pk, "verdict": "approve", "comment": ""},
    )
    assert response.status_code == 400
    assert "can be rejected, not approved" in response.content.decode()


def test_proposal_detail_shows_patch_warnings_diff_and_backtests(
    client, users, submit, make_backtest
):
    proposal = submit(
        {
            "work_types": {
                "implementation-review": ["result", "decision", "rule", "measurement-contract"]
            }
        }
    )
    make_backtest(proposal)
    html = (
        login(client, users["auditor"])
        .get(reverse("proposal-detail", args=[proposal.pk]))
        .content.decode()
    )
    assert 'id="warnings"' in html and "measurement-contract" in html.split('id="warnings"')[1]
    assert "&quot;implementation-review&quot;" in html.split('id="patch"')[1]
    assert "mark-moved" in html
    assert "Only a reviewer" in html and "Only a project lead" in html


def test_backtests_link_to_their_page(client, users, tested):
    proposal, backtest = tested
    html = (
        login(client, users["auditor"])
        .get(reverse("proposal-detail", args=[proposal.pk]))
        .content.decode()
    )
    assert f'href="/backtests/{backtest.pk}/"' in html
    assert f"#{backtest.pk}" in html


def test_proposal_list_shows_states_in_fixed_queries(client, project, users, submit, make_backtest):
    login(client, users["auditor"])
    url = reverse("proposal-list", args=["alpha"])

    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    make_backtest(submit())
    few = queries()
    for _ in range(5):
        make_backtest(submit({"class_pull": 4}))
    assert queries() == few == 6  # session, user, project, grants, current version, proposals
    html = client.get(url).content.decode()
    assert html.count('<span class="badge proposed">proposed</span>') == 6


# --- audit log ----------------------------------------------------------------------------------


def _entries(project, n, action="proposal.submitted", actor=None):
    for i in range(n):
        AuditEntry.objects.create(
            actor=actor,
            actor_label=actor.username if actor else "system",
            project=project,
            action=action,
            object_type="proposal",
            object_id=str(i),
            summary=f"entry {i}",
        )


def test_audit_log_paginates_in_a_pinned_number_of_queries(client, project, users):
    login(client, users["auditor"])
    url = reverse("audit-log")

    def queries(query=""):
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url + query)
        assert response.status_code == 200
        return len(captured), response.content.decode()

    _entries(project, 3, actor=users["lead"])
    few, _ = queries()
    _entries(project, 60, actor=users["lead"])
    many, html = queries()
    assert few == many == 7  # session, user, grants, projects, actions, count, page
    assert html.count("<tr>") == 1 + 50  # header + one page
    assert "page 1 of 2" in html
    later, html = queries("?page=2")
    assert later == many and html.count("<tr>") == 1 + 13


def test_audit_log_filters(client, project, users):
    from selection.models import Project

    beta = Project.objects.get(slug="beta")
    _entries(project, 2, actor=users["lead"])
    _entries(project, 3, action="backtest.approved", actor=users["reviewer"])
    _entries(beta, 4, actor=users["lead"])
    # rows are append-only and `at` is set on insert: an old entry is inserted with its time
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO authority_auditentry (at, actor_label, project_id, action, object_type,"
            " object_id, summary, payload) VALUES (now() - interval '10 days', 'import', %s,"
            " 'frame.imported', 'frameversion', '1', '', '{}'::jsonb)",
            [project.pk],
        )
    client = login(client, users["root"])
    url = reverse("audit-log")

    def count(query):
        return client.get(url + query).context["page"].paginator.count

    assert count("") == 10
    assert count("?project=alpha") == 6
    assert count("?action=backtest.approved") == 3
    assert count("?actor=lead") == 6
    assert count("?actor=lead&project=alpha") == 2
    from django.utils import timezone

    today = timezone.localdate()
    assert count(f"?since={today}&until={today}") == 9
    assert count(f"?until={today - timedelta(days=1)}") == 1
    assert count(f"?since={today - timedelta(days=11)}&until={today - timedelta(days=9)}") == 1
    assert count(f"?since={today + timedelta(days=1)}") == 0
    assert count(f"?action=frame.imported&actor=import&project=alpha&until={today}") == 1


def test_audit_log_shows_each_user_only_their_projects(client, project, users, grant):
    from selection.models import Project

    beta = Project.objects.get(slug="beta")
    _entries(project, 2)
    _entries(beta, 3)
    _entries(None, 1)

    def count(user):
        return login(client, user).get(reverse("audit-log")).context["page"].paginator.count

    assert count(users["root"]) == 6
    assert count(users["auditor"]) == 3  # alpha + the entry bound to no project
    assert count(users["lead"]) == 2
    assert count(users["outsider"]) == 0
    grant(users["lead"], beta, "reviewer")
    assert count(users["lead"]) == 5
