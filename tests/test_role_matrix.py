"""The role matrix: every page URL and every API operation, as anonymous, a user with no role,
auditor, reviewer, lead, a lead of another project, and an API token of each scope, allowed or
denied as the expected tables below say (written out here, never read off access.py); nothing but
the login pages and /api/v1/health answers without authentication.

A page URL added without a row fails test_every_page_url_is_in_the_matrix, an API operation added
without a row fails test_every_api_operation_is_in_the_matrix, and any URL pattern at all that
answers an anonymous request fails test_nothing_but_login_and_health_answers_without_authentication.
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from authority.models import RoleGrant
from selection.models import Job, JobKind
from tests.selection.test_traces import embedding_cache  # noqa: F401 - module-wide vectors

ROLES = ("anonymous", "none", "auditor", "reviewer", "lead", "other_lead")
# API tokens, one per scope: the lead's read-only token, a token scoped to each role in the project
# (held by the user who holds that role), the other project's lead's token scoped to it, and an
# agent token of the project (issued by its reviewer: select, write memory, report outcomes)
TOKENS = ("token:read", "token:auditor", "token:reviewer", "token:lead", "token:other_lead", "token:agent")
PRINCIPALS = ROLES + TOKENS
MEMBERS = {"auditor", "reviewer", "lead"}
ALLOW, DENY, LOGIN = "allow", "deny", "login"


@pytest.fixture
def world(db, tmp_path, django_user_model, make_project, django_capture_on_commit_callbacks):
    from backtest import services as backtest_services
    from governance.models import Proposal
    from selection.evaluation.ladder import evaluation_run
    from tests.selection.test_traces import Lab

    lab = Lab(tmp_path)
    far = make_project("far")
    users = {"anonymous": None, "none": django_user_model.objects.create_user("none")}
    for role in ("auditor", "reviewer", "lead"):
        users[role] = django_user_model.objects.create_user(role)
        RoleGrant.objects.create(user=users[role], project=lab.project, role=role)
    users["other_lead"] = django_user_model.objects.create_user("other_lead")
    RoleGrant.objects.create(user=users["other_lead"], project=far, role="lead")
    from governance.tokens import services as tokens

    secrets = {
        "token:read": tokens.token_create(user=users["lead"], name="read").secret,
        "token:other_lead": tokens.token_create(user=users["other_lead"], name="far", project=far, role="lead").secret,
    }
    for role in ("auditor", "reviewer", "lead"):
        secrets[f"token:{role}"] = tokens.token_create(
            user=users[role], name=role, project=lab.project, role=role
        ).secret
    secrets["token:agent"] = tokens.token_create(
        user=users["reviewer"], name="agent", project=lab.project, role="agent"
    ).secret
    trace = lab.select().trace
    other = lab.select(budget=200).trace
    proposal = Proposal.objects.get(project=lab.project)
    with django_capture_on_commit_callbacks(execute=False):
        backtest = backtest_services.backtest_enqueue(proposal=proposal, requested_by=None)
    evaluation = evaluation_run(corpus=lab.corpus, conditions=["C6"], actor=users["lead"])
    job = Job.objects.create(kind=JobKind.EVALUATION, corpus=lab.corpus, requested_by=users["lead"])
    from governance.models import WebhookEndpoint

    hook = WebhookEndpoint.objects.create(
        project=lab.project, url="https://hooks.example.com/", secret="s" * 64, events=[]
    )
    return {
        "job": job.pk,
        "webhook": hook.pk,
        "users": users,
        "tokens": secrets,
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
        ("glossary", "get", reverse("glossary"), None, anyone),
        ("trace-search-export", "get", reverse("trace-search-export", args=["csv"]), None, anyone),
        ("trace-diff", "get", reverse("trace-diff") + f"?a={t}&b={w['other']}", None, member),
        ("trace-detail", "get", reverse("trace-detail", args=[t]), None, member),
        ("trace-verify", "get", reverse("trace-verify", args=[t]), None, member),
        ("trace-counterfactual", "get", reverse("trace-counterfactual", args=[t, "r1"]), None, member),
        ("trace-now", "get", reverse("trace-now", args=[t]), None, member),
        ("trace-now", "post", reverse("trace-now", args=[t]), {}, only("lead", "reviewer")),
        ("trace-export", "get", reverse("trace-export", args=[t, "json"]), None, member),
        ("unit-detail", "get", reverse("unit-detail", args=[w["corpus"], "r1"]), None, member),
        # without the typed confirmation: a lead gets the form back (400), nothing is erased
        ("unit-erase", "post", reverse("unit-erase", args=[w["corpus"], "r1"]), {"reason": "r"}, only("lead")),
        ("project-retention", "get", reverse("project-retention", args=[s]), None, member),
        ("project-retention", "post", reverse("project-retention", args=[s]), {"live_days": "0"}, only("lead")),
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
            "proposal-promote-confirm",
            "get",
            reverse("proposal-promote-confirm", args=[w["proposal"]]),
            None,
            only("lead"),
        ),
        ("proposal-backtest-start", "post", reverse("proposal-backtest-start", args=[w["proposal"]]), {}, only("lead")),
        ("proposal-resubmit", "post", reverse("proposal-resubmit", args=[w["proposal"]]), {}, only("lead")),
        ("proposal-split", "post", reverse("proposal-split", args=[w["proposal"]]), {}, only("lead")),
        # close (an empty reason is refused with a message), roll back (to the current
        # version: refused with a message), comment, webhooks, the labelling queue and page
        ("proposal-close", "post", reverse("proposal-close", args=[w["proposal"]]), {"reason": ""}, only("lead")),
        ("proposal-rollback", "post", reverse("proposal-rollback", args=[s]), {"version": "1"}, only("lead")),
        # the emergency revert: ask (an empty reason is refused with a message), confirm (nothing
        # asked for on this proposal: refused with a message)
        (
            "proposal-revert-request", "post", reverse("proposal-revert-request", args=[w["proposal"]]),
            {"reason": ""}, only("lead"),
        ),
        (
            "proposal-revert-confirm", "post", reverse("proposal-revert-confirm", args=[w["proposal"]]), {},
            only("lead", "reviewer"),
        ),
        (
            "proposal-comment",
            "post",
            reverse("proposal-comment", args=[w["proposal"]]),
            {"body": ""},
            only("lead", "reviewer"),
        ),
        ("project-webhooks", "get", reverse("project-webhooks", args=[s]), None, only("lead")),
        ("project-webhook-rotate", "post", reverse("project-webhook-rotate", args=[s, w["webhook"]]), {}, only("lead")),
        ("trace-queue", "get", reverse("trace-queue"), None, anyone),
        ("trace-label", "get", reverse("trace-label", args=[t]), None, member),
        ("trace-label", "post", reverse("trace-label", args=[t]), {"uid": ""}, only("lead", "reviewer")),
        # a lead or a reviewer queues a frame health reading (on commit; none here)
        ("project-health-check", "post", reverse("project-health-check", args=[s]), {}, only("lead", "reviewer")),
        # memory: the units and "Add a unit" (an empty unit is refused with the form back, 400), the
        # "Supersede" form, the "To admit" queue, a decision (on no candidate: refused with a message)
        ("project-memory", "get", reverse("project-memory", args=[s]), None, member),
        ("project-memory", "post", reverse("project-memory", args=[s]), {"text": ""}, only("lead")),
        ("memory-supersede", "get", reverse("memory-supersede", args=[s, "r1"]), None, member),
        ("memory-supersede", "post", reverse("memory-supersede", args=[s, "r1"]), {"text": ""}, only("lead")),
        ("memory-queue", "get", reverse("memory-queue", args=[s]), None, member),
        (
            "memory-decide", "post", reverse("memory-decide", args=[s, "r1"]), {"decision": "admit", "reason": "r"},
            only("lead", "reviewer"),
        ),
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


def as_principal(client, world, principal) -> dict:
    """Sign the client in as `principal` (a session for a role, nothing for a token) and return
    the headers its requests carry (a token's bearer header)."""
    client.logout()
    if principal in TOKENS:
        return {"Authorization": f"Bearer {world['tokens'][principal]}"}
    if world["users"][principal] is not None:
        client.force_login(world["users"][principal])
    return {}


def test_the_role_matrix(world, client):
    cells, wrong = 0, []
    for name, method, url, data, rule in pages(world):
        for principal in PRINCIPALS:
            headers = as_principal(client, world, principal)
            response = getattr(client, method)(url, data or {}, headers=headers)
            # pages are for people: a token signs nobody in, so a page treats it as anonymous
            expected = rule("anonymous") if principal in TOKENS else rule(principal)
            got = outcome(response)
            cells += 1
            if got != expected:
                wrong.append(f"{method.upper()} {name} as {principal}: {got}, expected {expected}")
    assert not wrong, "\n".join(wrong)
    print(f"\nrole matrix (pages): {cells} cells checked")
    assert cells == len(pages(world)) * len(PRINCIPALS)


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


# --- the API: every operation of the OpenAPI schema, and the MCP endpoint ----------------------

READERS = {
    "auditor", "reviewer", "lead", "token:read", "token:auditor", "token:reviewer", "token:lead", "token:agent",
}  # fmt: skip
# what a corpus-wide read needs: a role (an agent token is held to its project's selections)
CORPUS_READERS = READERS - {"token:agent"}
# who writes memory: a lead, and an agent token of the project
WRITERS = {"lead", "token:lead", "token:agent"}
# who admits or declines a candidate: a lead or a reviewer, never through an agent token
ADMITTERS = {"lead", "reviewer", "token:lead", "token:reviewer"}
SIGNED = set(PRINCIPALS) - {"anonymous"}  # any session or live token: lists show what each may read
NOBODY: set[str] = set()  # importing a corpus: a signed-in superuser only, never a token


def api_operations(w):
    """(method, schema path) -> (url, body, principals allowed): the API's expected table."""
    s, t, o = w["slug"], w["trace"], w["other"]
    b, p, e, j, c = w["backtest"], w["proposal"], w["evaluation"], w["job"], w["corpus"]
    v = "/api/v1"
    return {
        ("get", f"{v}/health"): (f"{v}/health", None, set(PRINCIPALS)),
        ("get", f"{v}/health/live"): (f"{v}/health/live", None, set(PRINCIPALS)),
        ("get", f"{v}/health/ready"): (f"{v}/health/ready", None, set(PRINCIPALS)),
        ("get", f"{v}/projects"): (f"{v}/projects", None, SIGNED),
        ("get", f"{v}/projects/{{slug}}/frames"): (f"{v}/projects/{s}/frames", None, READERS),
        ("get", f"{v}/projects/{{slug}}/frames/diff"): (f"{v}/projects/{s}/frames/diff?a=1&b=1", None, READERS),
        ("get", f"{v}/projects/{{slug}}/frames/{{number}}"): (f"{v}/projects/{s}/frames/1", None, READERS),
        ("get", f"{v}/audit"): (f"{v}/audit", None, SIGNED),
        ("post", f"{v}/select"): (f"{v}/select", {"project": s, "query": "Which units matter?"}, READERS),
        ("get", f"{v}/traces"): (f"{v}/traces", None, SIGNED),
        ("get", f"{v}/traces/{{trace_id}}"): (f"{v}/traces/{t}", None, READERS),
        ("get", f"{v}/traces/{{a}}/diff/{{b}}"): (f"{v}/traces/{t}/diff/{o}", None, READERS),
        ("post", f"{v}/traces/{{trace_id}}/verify"): (f"{v}/traces/{t}/verify", {}, READERS),
        ("get", f"{v}/traces/{{trace_id}}/counterfactual/{{unit}}"): (
            f"{v}/traces/{t}/counterfactual/r1",
            None,
            READERS,
        ),
        # an outcome is an agent's report: any role in the project, not a read-only token
        ("post", f"{v}/traces/{{trace_id}}/outcomes"): (
            f"{v}/traces/{t}/outcomes",
            {"verdict": "helped"},
            READERS - {"token:read"},
        ),
        ("get", f"{v}/corpora"): (f"{v}/corpora", None, SIGNED),
        ("post", f"{v}/corpora"): (f"{v}/corpora", "archive", NOBODY),
        ("get", f"{v}/corpora/{{name}}/evaluations"): (f"{v}/corpora/{c}/evaluations", None, CORPUS_READERS),
        ("post", f"{v}/corpora/{{name}}/evaluations"): (
            f"{v}/corpora/{c}/evaluations",
            {"conditions": ["no-such-condition"]},
            {"lead", "token:lead"},
        ),
        ("get", f"{v}/evaluations/{{evaluation_id}}"): (f"{v}/evaluations/{e}", None, CORPUS_READERS),
        ("get", f"{v}/jobs/{{job_id}}"): (f"{v}/jobs/{j}", None, CORPUS_READERS),
        ("post", f"{v}/proposals"): (
            f"{v}/proposals",
            {"project": s, "title": "t", "patch": {"class_pull": 7}},
            {"lead", "token:lead"},
        ),
        ("get", f"{v}/proposals/{{proposal_id}}"): (f"{v}/proposals/{p}", None, READERS),
        ("post", f"{v}/proposals/{{proposal_id}}/promotion"): (
            f"{v}/proposals/{p}/promotion",
            {},
            {"lead", "token:lead"},
        ),
        ("get", f"{v}/backtests/{{backtest_id}}"): (f"{v}/backtests/{b}", None, READERS),
        ("post", f"{v}/backtests/{{backtest_id}}/reviews"): (
            f"{v}/backtests/{b}/reviews",
            {"verdict": "approve"},
            {"reviewer", "token:reviewer"},
        ),
        # split (a proposal of one part is refused with a 422, past the access check)
        ("post", f"{v}/proposals/{{proposal_id}}/split"): (f"{v}/proposals/{p}/split", {}, {"lead", "token:lead"}),
        # bodies the schema accepts and the service refuses after the access check
        # (a proposal over the current version has nothing to rebase; a blank reason; a rollback to
        # the current version; a blank comment; a label of no unit)
        ("post", f"{v}/proposals/{{proposal_id}}/rebase"): (
            f"{v}/proposals/{p}/rebase",
            {"resolutions": {}},
            {"lead", "token:lead"},
        ),
        ("post", f"{v}/proposals/{{proposal_id}}/close"): (
            f"{v}/proposals/{p}/close",
            {"reason": " "},
            {"lead", "token:lead"},
        ),
        ("post", f"{v}/rollbacks"): (f"{v}/rollbacks", {"project": s, "version": 1}, {"lead", "token:lead"}),
        ("post", f"{v}/proposals/{{proposal_id}}/comments"): (
            f"{v}/proposals/{p}/comments",
            {"body": " "},
            {"lead", "reviewer", "token:lead", "token:reviewer"},
        ),
        ("get", f"{v}/proposals/{{proposal_id}}/timeline"): (f"{v}/proposals/{p}/timeline", None, READERS),
        ("post", f"{v}/traces/{{trace_id}}/task"): (
            f"{v}/traces/{t}/task",
            {"labels": {}},
            {"lead", "reviewer", "token:lead", "token:reviewer"},
        ),
        # a project's webhooks and their secrets: the lead's (an ftp URL is refused past the check)
        ("get", f"{v}/projects/{{slug}}/webhooks"): (f"{v}/projects/{s}/webhooks", None, {"lead", "token:lead"}),
        ("post", f"{v}/projects/{{slug}}/webhooks"): (
            f"{v}/projects/{s}/webhooks",
            {"url": "ftp://x.test/", "events": []},
            {"lead", "token:lead"},
        ),
        ("post", f"{v}/projects/{{slug}}/webhooks/{{webhook_id}}/secret"): (
            f"{v}/projects/{s}/webhooks/{w['webhook']}/secret",
            {},
            {"lead", "token:lead"},
        ),
        # the project's frame health readings
        ("get", f"{v}/projects/{{slug}}/health"): (f"{v}/projects/{s}/health", None, READERS),
        # memory writes: bodies the service refuses past the access check (an empty unit, neither a
        # new unit nor a source, a loop that is no open loop, a decision on no candidate)
        ("post", f"{v}/projects/{{slug}}/units"): (f"{v}/projects/{s}/units", {}, WRITERS),
        ("get", f"{v}/projects/{{slug}}/units/{{uid}}"): (f"{v}/projects/{s}/units/r1", None, READERS),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/supersede"): (
            f"{v}/projects/{s}/units/r1/supersede", {}, WRITERS,
        ),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/refute"): (f"{v}/projects/{s}/units/r1/refute", {}, WRITERS),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/echo"): (f"{v}/projects/{s}/units/r1/echo", {}, WRITERS),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/support"): (f"{v}/projects/{s}/units/r1/support", {}, WRITERS),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/close-loop"): (
            f"{v}/projects/{s}/units/r1/close-loop", {}, WRITERS,
        ),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/reopen-loop"): (
            f"{v}/projects/{s}/units/r1/reopen-loop", {}, WRITERS,
        ),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/admit"): (
            f"{v}/projects/{s}/units/r1/admit", {"reason": "r"}, ADMITTERS,
        ),
        ("post", f"{v}/projects/{{slug}}/units/{{uid}}/decline"): (
            f"{v}/projects/{s}/units/r1/decline", {"reason": "r"}, ADMITTERS,
        ),
        # the MCP endpoint (not in the schema): tokens only; what a tool may do is access.py's
        ("post", "/mcp"): ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, set(TOKENS)),
    }


def api_outcome(response) -> str:
    if response.status_code == 401:
        return LOGIN
    if response.status_code in (403, 404):  # another project's object is not found, or forbidden
        return DENY
    if response.status_code in (200, 201, 202, 400, 409, 422):  # past the access check
        return ALLOW
    if response.status_code == 503 and response.request["PATH_INFO"].endswith("/health/ready"):
        return ALLOW  # the readiness probe answers anyone: 503 while the model and indexes load
    return f"HTTP {response.status_code}"


def api_call(client, method, url, body, headers):
    if body == "archive":
        from django.core.files.uploadedfile import SimpleUploadedFile

        upload = SimpleUploadedFile("c.tar.gz", b"not an archive", content_type="application/gzip")
        return client.post(url, {"archive": upload}, headers=headers)
    if method == "get":
        return client.get(url, headers=headers)
    accept = {"Accept": "application/json, text/event-stream"} if url == "/mcp" else {}
    return client.post(url, body, content_type="application/json", headers={**headers, **accept})


def test_the_api_role_matrix(world, client):
    cells, wrong = 0, []
    for (method, path), (url, body, allowed) in api_operations(world).items():
        for principal in PRINCIPALS:
            headers = as_principal(client, world, principal)
            response = api_call(client, method, url, body, headers)
            expected = ALLOW if principal in allowed else (LOGIN if principal == "anonymous" else DENY)
            if path == "/mcp" and principal in ROLES:
                expected = LOGIN  # a session is no MCP credential
            got = api_outcome(response)
            cells += 1
            if got != expected:
                status = response.status_code
                wrong.append(f"{method.upper()} {path} as {principal}: {got} ({status}), expected {expected}")
    assert not wrong, "\n".join(wrong)
    print(f"\nrole matrix (API): {cells} cells checked")
    assert cells == len(api_operations(world)) * len(PRINCIPALS)


def test_every_api_operation_is_in_the_matrix(world):
    from config.api_site import api

    schema = api.get_openapi_schema()
    served = {(method, path) for path, operations in schema["paths"].items() for method in operations}
    table = {key for key in api_operations(world) if key[1].startswith("/api/")}
    assert served - table == set(), f"API operations without a row in the role matrix: {sorted(served - table)}"
    assert table - served == set(), f"rows for API operations that no longer exist: {sorted(table - served)}"


# --- every URL pattern, anonymous ---------------------------------------------------------------

# what answers an anonymous request, by pattern; every other pattern sends it to a login page
# (302) or answers 401, for GET and POST alike
ANONYMOUS_ANSWERS = {
    "login/": {200},  # the login form; a POST without credentials shows it again
    "admin/login/": {200},
    "admin/logout/": {302},  # Django's admin: to /admin/, which sends to its login page
    "api/v1/health": {200, 405},  # is the service up; GET only
    "api/v1/health/live": {200, 405},  # the liveness probe
    "api/v1/health/ready": {200, 503, 405},  # the readiness probe: 503 until the model and indexes load
    "local/command": {403, 405},  # the signed loopback command channel: POST only, refused unsigned
    "api/v1/": {404},  # no operation there: a problem document naming nothing
    "api/v1/<path:rest>": {404},
}


def _all_patterns(resolver, prefix="") -> list[str]:
    out = []
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            out += _all_patterns(pattern, prefix + str(pattern.pattern))
        else:
            out.append(prefix + str(pattern.pattern))
    return out


def _fill(pattern: str, w) -> str:
    """A concrete URL for `pattern`, its parameters filled with real ids of the fixture's objects."""
    import re

    values = {
        "slug": w["slug"], "name": w["corpus"], "fmt": "json", "unit_uid": "r1", "unit": "r1",
        "uid": "r1", "pk": str(w["trace"]), "trace_id": str(w["trace"]), "a": str(w["trace"]), "b": str(w["other"]),
        "backtest_id": str(w["backtest"]), "proposal_id": str(w["proposal"]), "evaluation_id": str(w["evaluation"]),
        "job_id": str(w["job"]), "number": "1", "rest": "no-such-operation", "id": str(w["users"]["lead"].pk),
        "object_id": str(w["users"]["lead"].pk), "content_type_id": "1", "app_label": "auth", "url": "nothing/",
        "webhook_id": str(w["webhook"]),
    }  # fmt: skip
    url = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: values[m.group(1)], pattern)
    url = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], url)
    return "/" + url.replace("^", "").replace("$", "")


def test_nothing_but_login_and_health_answers_without_authentication(world, client):
    patterns = _all_patterns(get_resolver())
    cells, wrong = 0, []
    for pattern in patterns:
        url = _fill(pattern, world)
        for method in ("get", "post"):
            client.logout()
            response = getattr(client, method)(url)
            status = response.status_code
            to_login = status == 302 and response["Location"].split("?")[0] in ("/login/", "/admin/login/")
            cells += 1
            if pattern in ANONYMOUS_ANSWERS:
                ok = status in ANONYMOUS_ANSWERS[pattern]
            else:
                # 405: a method the URL does not serve is refused before any check, carrying nothing
                ok = to_login or status in (401, 405)
            if not ok:
                where = response.get("Location", "")
                wrong.append(f"{method.upper()} {url} ({pattern}) anonymous: HTTP {status} {where}")
    assert not wrong, "\n".join(wrong)
    print(f"\nrole matrix (every URL pattern, anonymous): {len(patterns)} patterns, {cells} cells checked")
