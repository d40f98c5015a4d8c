"""The governance routes of the API: projects, frames, proposals, reviews, promotion, audit, tokens.

They call the services the pages call, so a token does exactly what its owner could there and no more.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.api.conftest import API, ApiClient, assert_problem

PATCH = {"work_types": {"implementation-review": ["rule", "decision"]}}


@pytest.fixture
def token(users, project):
    from governance.tokens import services as tokens

    def make(name: str, role: str | None = None, scoped=project, days: int = 30) -> str:
        return tokens.token_create(
            user=users[name], name=f"{name}-token", project=scoped if role else None, role=role, days=days
        ).secret

    return make


@pytest.fixture
def as_(client, token):
    def make(name: str, role: str | None = None) -> ApiClient:
        return ApiClient(client, token(name, role))

    return make


def test_projects_frames_and_diff(as_, submit):
    lead = as_("lead", "lead")
    rows = lead.get("/projects").json()
    assert [r["slug"] for r in rows] == ["alpha"]
    assert rows[0]["can_propose"] and not rows[0]["can_review"]
    submit()
    versions = lead.get("/projects/alpha/frames").json()
    assert [v["number"] for v in versions] == [2, 1]
    assert versions[1]["current"] and not versions[0]["current"]
    frame = lead.get("/projects/alpha/frames/2").json()
    assert frame["snapshot"]["work_types"]["implementation-review"] == ["rule", "decision"]
    diff = lead.get("/projects/alpha/frames/diff", a=1, b=2).json()
    assert diff["changed"] == 1
    assert [r["path"] for r in diff["rows"] if r["status"] != "same"] == ["work_types.implementation-review"]
    assert_problem(lead.get("/projects/alpha/frames/9"), 404)
    assert_problem(lead.get("/projects/alpha/frames/diff", a=1), 422)


def test_a_lead_token_proposes_and_gets_warnings_and_issues(as_, counts):
    lead = as_("lead", "lead")
    response = lead.post("/proposals", {"project": "alpha", "title": "Rules first", "patch": PATCH})
    assert response.status_code == 201, response.content
    proposal = response.json()
    assert (proposal["base_version"], proposal["frame_version"], proposal["state"]) == (1, 2, "proposed")
    assert lead.get(f"/proposals/{proposal['id']}").json()["title"] == "Rules first"

    before = counts()
    bad = lead.post("/proposals", {"project": "alpha", "title": "Bad", "patch": {"class_pull": "many"}})
    doc = assert_problem(bad, 422)
    assert doc["errors"][0]["location"][:3] == ["body", "patch", "class_pull"]
    assert counts() == before


def test_a_token_never_does_more_than_its_scope(as_, counts):
    clients = [as_(who, role) for who, role in (("reviewer", "reviewer"), ("auditor", "auditor"), ("lead", None))]
    before = counts()
    for refused in (c.post("/proposals", {"project": "alpha", "title": "x", "patch": PATCH}) for c in clients):
        assert_problem(refused, 403)
    assert counts() == before


def test_a_token_for_a_role_its_owner_lacks_cannot_be_made(users, project):
    from authority import access
    from governance.tokens import services as tokens

    with pytest.raises(access.AccessDenied):
        tokens.token_create(user=users["reviewer"], name="x", project=project, role="lead")


def test_review_and_promotion_refusals_are_409(as_, submit, make_backtest, users):
    proposal = submit()
    backtest = make_backtest(proposal, status="running", decided=False)
    reviewer = as_("reviewer", "reviewer")
    doc = assert_problem(reviewer.post(f"/backtests/{backtest.pk}/reviews", {"verdict": "approve"}), 409)
    assert "not finished" in doc["detail"]
    lead = as_("lead", "lead")
    assert_problem(lead.post(f"/proposals/{proposal.pk}/promotion"), 409)
    assert_problem(lead.post(f"/backtests/{backtest.pk}/reviews", {"verdict": "approve"}), 403)
    assert_problem(reviewer.post(f"/backtests/{backtest.pk}/reviews", {"verdict": "maybe"}), 422)


def test_approve_then_promote_through_the_api(as_, submit, make_backtest):
    proposal = submit()
    backtest = make_backtest(proposal, passed=True)
    reviewer, lead = as_("reviewer", "reviewer"), as_("lead", "lead")
    reviewed = reviewer.post(f"/backtests/{backtest.pk}/reviews", {"verdict": "approve", "comment": "fine"})
    assert reviewed.status_code == 201, reviewed.content
    assert reviewed.json()["approval"]["reviewer"] == "reviewer"
    promoted = lead.post(f"/proposals/{proposal.pk}/promotion")
    assert promoted.status_code == 201, promoted.content
    assert promoted.json()["frame_version"] == 2
    assert lead.get("/projects").json()[0]["current_version"] == 2
    assert_problem(lead.post(f"/proposals/{proposal.pk}/promotion"), 409)
    actions = [e["action"] for e in lead.get("/audit").json()["results"] if not e["action"].startswith("token.")]
    assert actions[:3] == ["proposal.promoted", "backtest.approved", "proposal.submitted"]


def test_audit_filters_and_scope(as_, submit, users, token):
    submit()
    lead = as_("lead", "lead")
    entries = lead.get("/audit", action="proposal.submitted").json()
    assert entries["count"] == 1 and entries["results"][0]["project"] == "alpha"
    assert lead.get("/audit", action="nothing").json()["count"] == 0
    assert lead.get("/audit", project="beta").json()["count"] == 0
    assert_problem(lead.get("/audit", since="yesterday"), 422)
    # a superuser's project-scoped token... a superuser holds no grant here, so reads nothing
    assert as_("outsider").get("/audit").json()["count"] == 0


def test_tokens_are_shown_once_stored_hashed_revocable_and_audited(client, users, project):
    from authority.models import AuditEntry
    from governance.models import ApiToken

    client.force_login(users["lead"])
    page = client.post("/settings/tokens/new/", {"name": "ci", "scope": f"{project.pk}:lead", "days": 30})
    assert page.status_code == 200
    secret = page.context["issued"].secret
    assert secret in page.content.decode()
    stored = ApiToken.objects.get()
    assert stored.digest != secret and secret not in str(ApiToken.objects.values().get())
    assert secret not in client.get("/settings/tokens/").content.decode()  # shown once

    bot = ApiClient(client.__class__(), secret)
    assert bot.get("/projects").status_code == 200
    stored.refresh_from_db()
    assert stored.last_used_at is not None

    client.post(f"/settings/tokens/{stored.pk}/revoke/")
    assert_problem(bot.get("/projects"), 401)
    assert list(AuditEntry.objects.filter(object_type="apitoken").values_list("action", flat=True)) == [
        "token.revoked",
        "token.created",
    ]


def test_an_expired_token_is_refused(client, users, token):
    from django.utils import timezone

    from governance.models import ApiToken

    secret = token("lead", "lead")
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_problem(ApiClient(client, secret).get("/projects"), 401)


def test_someone_elses_token_cannot_be_revoked(client, users, token):
    from governance.models import ApiToken

    token("lead", "lead")
    client.force_login(users["reviewer"])
    client.post(f"/settings/tokens/{ApiToken.objects.get().pk}/revoke/")
    assert ApiToken.objects.get().revoked_at is None


def test_health_is_public(client, db):
    body = client.get(f"{API}/health").json()
    assert body["database"] is True and body["broker"] is True
