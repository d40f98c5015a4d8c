"""The role matrix: every page URL, as anonymous, no role, auditor, reviewer, lead, and a lead of
another project, allowed or denied as the roles say; nothing but login answers without a login.

The API's endpoints are the API's own matrix (issue 11). A page URL added without a row here
fails test_every_page_url_is_in_the_matrix.
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from authority.models import RoleGrant
from selection.models import Job, JobKind
from tests.selection.test_traces import embedding_cache  # noqa: F401 - module-wide vectors

ROLES = ("anonymous", "none", "auditor", "reviewer", "lead", "other_lead")
MEMBERS = {"auditor", "reviewer", "lead"}
ALLOW, DENY, LOGIN = "allow", "deny", "login"


@pytest.fixture
def world(db, tmp_path, django_user_model, make_project, django_capture_on_commit_callbacks):
    from backtest import services as backtest_services
    from governance.models import Proposal
    from selection.evaluation import evaluation_run
    from tests.selection.test_traces import Lab

    lab = Lab(tmp_path)
    far = make_project("far")
    users = {"anonymous": None, "none": django_user_model.objects.create_user("none")}
    for role in ("auditor", "reviewer", "lead"):
        users[role] = django_user_model.objects.create_user(role)
        RoleGrant.objects.create(user=users[role], project=lab.project, role=role)
    users["other_lead"] = django_user_model.objects.create_user("other_lead")
    RoleGrant.objects.create(user=users["other_lead"], project=far, role="lead")
    trace = lab.select().trace
    other = lab.select(budget=200).trace
    proposal = Proposal.objects.get(project=lab.project)
    with django_capture_on_commit_callbacks(execute=False):
        backtest = backtest_services.backtest_enqueue(proposal=proposal, requested_by=None)
    evaluation = evaluation_run(corpus=lab.corpus, conditions=["C6"], actor=users["lead"])
    job = Job.objects.create(kind=JobKind.EVALUATION, corpus=lab.corpus, requested_by=users["lead"])
    return {
        "job": job.pk,
        "users": users,
        "slug": lab.project.slug,
        "corpus": lab.corpus.name,
        "trace": trace.pk,
        "other": other.pk,
        "proposal": proposal.pk,
        "backtest": backtest.pk,
        "evaluation": evaluation.pk,
    }


def member(role):
    return ALLOW if role in MEMBERS else (LOGIN if role == "anonymous" else DENY)


def anyone(role):
    return LOGIN if role == "anonymous" else ALLOW


def only(*allowed):
    return lambda role: ALLOW if role in allowed else (LOGIN if role == "anonymous" else DENY)


def public(role):
    return ALLOW


def pages(w):
    """(name, method, url, data, rule): every page URL with the rule of who may use it."""
    s, t = w["slug"], w["trace"]
    return [
        ("home", "get", reverse("home"), None, anyone),
        ("login", "get", reverse("login"), None, public),
        ("audit-log", "get", reverse("audit-log"), None, anyone),
        ("project-detail", "get", reverse("project-detail", args=[s]), None, member),
        ("frame-diff", "get", reverse("frame-diff", args=[s]) + "?a=1&b=2", None, member),
        ("proposal-create", "get", reverse("proposal-create", args=[s]), None, member),
        (
            "proposal-create",
            "post",
            reverse("proposal-create", args=[s]),
            {"title": "t", "raw_patch": '{"class_pull": 7}'},
            only("lead"),
        ),
        ("proposal-list", "get", reverse("proposal-list", args=[s]), None, member),
        ("proposal-detail", "get", reverse("proposal-detail", args=[w["proposal"]]), None, member),
        (
            "proposal-review",
            "post",
            reverse("proposal-review", args=[w["proposal"]]),
            {"backtest": w["backtest"], "verdict": "approve"},
            only("reviewer"),
        ),
        ("proposal-promote", "post", reverse("proposal-promote", args=[w["proposal"]]), {}, only("lead")),
        ("backtest-detail", "get", reverse("backtest-detail", args=[w["backtest"]]), None, member),
        ("backtest-live", "get", reverse("backtest-live", args=[w["backtest"]]), None, member),
        ("backtest-rerun", "post", reverse("backtest-rerun", args=[w["backtest"]]), {}, only("lead")),
        ("trace-list", "get", reverse("trace-list"), None, anyone),
        ("trace-chain", "get", reverse("trace-chain"), None, anyone),
        ("trace-search-export", "get", reverse("trace-search-export", args=["csv"]), None, anyone),
        ("trace-diff", "get", reverse("trace-diff") + f"?a={t}&b={w['other']}", None, member),
        ("trace-detail", "get", reverse("trace-detail", args=[t]), None, member),
        ("trace-verify", "get", reverse("trace-verify", args=[t]), None, member),
        ("trace-counterfactual", "get", reverse("trace-counterfactual", args=[t, "r1"]), None, member),
        ("trace-now", "get", reverse("trace-now", args=[t]), None, member),
        ("trace-now", "post", reverse("trace-now", args=[t]), {}, only("lead", "reviewer")),
        ("trace-export", "get", reverse("trace-export", args=[t, "json"]), None, member),
        ("evaluation-list", "get", reverse("evaluation-list", args=[w["corpus"]]), None, member),
        (
            "evaluation-create",
            "post",
            reverse("evaluation-create", args=[w["corpus"]]),
            {"conditions": "no-such-condition"},
            only("lead"),
        ),
        ("evaluation-detail", "get", reverse("evaluation-detail", args=[w["evaluation"]]), None, member),
        ("evaluation-index", "get", reverse("evaluation-index"), None, anyone),
        ("job-detail", "get", reverse("job-detail", args=[w["job"]]), None, member),
        ("corpus-upload", "get", reverse("corpus-upload"), None, only()),  # superusers only
        ("api-tokens", "get", reverse("api-tokens"), None, anyone),  # each user's own tokens
        ("api-token-create", "post", reverse("api-token-create"), {}, anyone),
        ("api-token-revoke", "post", reverse("api-token-revoke", args=[999999]), {}, anyone),
        ("proposal-preview", "post", reverse("proposal-preview", args=[s]), {"class_pull": "4"}, member),
        (
            "proposal-promote-confirm", "get", reverse("proposal-promote-confirm", args=[w["proposal"]]), None,
            only("lead"),
        ),
        ("proposal-backtest-start", "post", reverse("proposal-backtest-start", args=[w["proposal"]]), {}, only("lead")),
        ("proposal-resubmit", "post", reverse("proposal-resubmit", args=[w["proposal"]]), {}, only("lead")),
        # issue 19: close (an empty reason is refused with a message), roll back (to the current
        # version: refused with a message), comment, webhooks, the labelling queue and page
        ("proposal-close", "post", reverse("proposal-close", args=[w["proposal"]]), {"reason": ""}, only("lead")),
        ("proposal-rollback", "post", reverse("proposal-rollback", args=[s]), {"version": "1"}, only("lead")),
        (
            "proposal-comment", "post", reverse("proposal-comment", args=[w["proposal"]]), {"body": ""},
            only("lead", "reviewer"),
        ),
        ("project-webhooks", "get", reverse("project-webhooks", args=[s]), None, only("lead")),
        ("trace-queue", "get", reverse("trace-queue"), None, anyone),
        ("trace-label", "get", reverse("trace-label", args=[t]), None, member),
        ("trace-label", "post", reverse("trace-label", args=[t]), {"uid": ""}, only("lead", "reviewer")),
        ("logout", "post", reverse("logout"), {}, lambda role: LOGIN),  # everyone ends on the login page
    ]


def outcome(response) -> str:
    if response.status_code == 403:
        return DENY
    if response.status_code == 302 and response["Location"].startswith(reverse("login")):
        return LOGIN
    if response.status_code in (200, 302, 400):  # 302 elsewhere: a write done or refused with a message
        return ALLOW
    return f"HTTP {response.status_code}"


def test_the_role_matrix(world, client):
    cells, wrong = 0, []
    for name, method, url, data, rule in pages(world):
        for role in ROLES:
            client.logout()
            if world["users"][role] is not None:
                client.force_login(world["users"][role])
            response = getattr(client, method)(url, data or {})
            got, expected = outcome(response), rule(role)
            cells += 1
            if got != expected:
                wrong.append(f"{method.upper()} {name} as {role}: {got}, expected {expected}")
    assert not wrong, "\n".join(wrong)
    print(f"\nrole matrix: {cells} cells checked")
    assert cells == len(pages(world)) * len(ROLES)


def _named_patterns(resolver, prefix="") -> set[str]:
    names = set()
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            if pattern.app_name == "admin" or str(pattern.pattern).startswith("api"):
                continue
            names |= _named_patterns(pattern)
        elif isinstance(pattern, URLPattern) and pattern.name and pattern.name != "mcp":  # the API's
            names.add(pattern.name)
    return names


def test_every_page_url_is_in_the_matrix(world):
    covered = {name for name, *_ in pages(world)}
    missing = _named_patterns(get_resolver()) - covered
    assert not missing, f"page URLs without a row in the role matrix: {sorted(missing)}"
