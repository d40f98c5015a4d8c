"""Tenants never see each other, proved by a generator: a hypothesis state machine issues random
sequences of API, MCP and page calls as users and tokens of every scope over two corpora, and fails
as soon as any answer carries the text, title or id of a unit of a project its caller holds no
role in (a redacted unit's id excepted: redaction shows it by id, project and class).

The corpora: `wide` holds tlab, whose frame's scope takes in tother (so tlab's traces carry
tother's units, redacted for a reader without a role in tother), and tother; `far` is a second
corpus with its own project. Its units' ids, texts and titles are unique strings, so a leak is a
substring match.

In `make test` it runs a fixed number of steps with a fixed seed (derandomized); a longer run:

    FG_TENANT_STEPS=10000 PYTHONPATH=$PWD .venv/bin/pytest -q -s tests/test_tenant_state_machine.py
"""

from __future__ import annotations

import json
import os

import anyio
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from mcp import Client

from tests.selection.test_redaction import SECRETS as TOTHER_SECRETS
from tests.selection.test_redaction import _units
from tests.selection.test_traces import (
    LAB_CORPUS,
    LAB_PROPOSALS,
    LAB_TASKS,
    embedding_cache,  # noqa: F401 - module-wide vectors
)

STEPS = int(os.environ.get("FG_TENANT_STEPS", "40"))
STEPS_PER_RUN = 10
API = "/api/v1"

FAR_CORPUS = """\
name: far
description: A second tenant, in its own corpus.
standpoint: 2026-09-20T12:00:00Z
projects:
  - slug: far
    name: Far
    frame:
      purpose: Keep the far team's deployment rules.
      scope: [far]
      default_classes: [rule, result]
      class_pull: 1
      work_types:
        review: [rule, result, note]
"""
FAR_UNITS = [
    {
        "id": f"farunit-{i}",
        "project": "far",
        "class": cls,
        "title": f"Farsecret title {i} of the deployment",
        "text": f"Farsecret text {i}: the deployment rule of the far team says ranking budget review {word}.",
        "created_at": "2026-09-01T10:00:00Z",
    }
    for i, (cls, word) in enumerate([("rule", "first"), ("result", "second"), ("note", "third"), ("rule", "last")])
]
FAR_TASKS = """\
tasks:
  - id: far-review
    project: far
    query: How should the far deployment rule be reviewed?
    standpoint: 2026-09-20T12:00:00Z
    budget_tokens: 200
    frame:
      work_type: review
    ledger:
      farunit-0: MUST
"""
QUERIES = ("How should the ranking budget rule be reviewed?", "far deployment rule review", "budget")


def _write(directory, corpus: str, units: list[dict], tasks: str, proposals: str | None = None):
    directory.mkdir(parents=True)
    (directory / "corpus.yaml").write_text(corpus, "utf-8")
    (directory / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units), "utf-8")
    (directory / "tasks.yaml").write_text(tasks, "utf-8")
    if proposals:
        (directory / "proposals.yaml").write_text(proposals, "utf-8")
    return directory


def _forbidden(roles: set[str]) -> list[str]:
    """What an answer to a holder of roles in `roles` must never contain."""
    out: list[str] = []
    if "far" not in roles:
        for unit in FAR_UNITS:
            out += [unit["id"], unit["title"], unit["text"]]
    if "tother" not in roles:
        # tother's units reach tlab's traces redacted: their ids may show, never text or title
        out += list(TOTHER_SECRETS)
        if "tlab" not in roles:
            out += ['"o1"', '"o0"']
    if "tlab" not in roles:
        for unit in _units():
            if unit["project"] == "tlab":
                out += [unit["text"], f'"{unit["id"]}"']
    return out


@pytest.fixture
def tenants(transactional_db, tmp_path, django_user_model, settings):
    from authority.models import RoleGrant
    from governance.tokens import services as tokens
    from governance.webhooks import services as webhooks
    from selection.memory.importing import corpus_import
    from selection.models import Project

    settings.FG_RATE_LIMITS = {kind: {"token": "0/60", "user": "0/60"} for kind in settings.FG_RATE_LIMITS}
    wide = LAB_CORPUS.replace("scope: [tlab]", "scope: [tlab, tother]")
    corpus_import(_write(tmp_path / "wide", wide, _units(), LAB_TASKS, LAB_PROPOSALS))
    corpus_import(_write(tmp_path / "far", FAR_CORPUS, FAR_UNITS, FAR_TASKS))
    projects = {p.slug: p for p in Project.objects.all()}
    people = {
        "tlab_lead": [("tlab", "lead")],
        "tlab_reviewer": [("tlab", "reviewer")],
        "tlab_auditor": [("tlab", "auditor")],
        "insider": [("tlab", "lead"), ("tother", "auditor")],
        "far_lead": [("far", "lead")],
        "outsider": [],
    }
    principals = []
    for name, grants in people.items():
        user = django_user_model.objects.create_user(name)
        for slug, role in grants:
            RoleGrant.objects.create(user=user, project=projects[slug], role=role)
        roles = {slug for slug, _ in grants}
        secrets = [("read", tokens.token_create(user=user, name="read").secret)]
        secrets += [
            (f"{role}@{slug}", tokens.token_create(user=user, name=role, project=projects[slug], role=role).secret)
            for slug, role in grants
        ]
        for scope, secret in secrets:
            principals.append({"name": f"{name}:{scope}", "user": user, "token": secret, "roles": roles})
    # each project's lead keeps a webhook: its payloads must carry nothing of another project
    settings.FG_WEBHOOK_ALLOW_HTTP = False
    for slug, lead in (("tlab", "tlab_lead"), ("far", "far_lead")):
        webhooks.webhook_create(
            project=projects[slug], lead=django_user_model.objects.get(username=lead),
            url=f"https://{slug}.hooks.example.com/", events=["proposal.submitted"],
        )  # fmt: skip
    return {"principals": principals, "projects": projects}


class TenantMachine(RuleBasedStateMachine):
    """Random calls by random principals; every answer checked against its caller's roles."""

    world: dict = {}
    client = None
    steps = 0

    traces = Bundle("traces")

    def __init__(self):
        super().__init__()
        self.principals = self.world["principals"]

    def _check(self, who: dict, surface: str, body: str, sent: tuple[str, ...] = ()) -> None:
        TenantMachine.steps += 1
        for echoed in sorted(sent, key=len, reverse=True):  # what the caller sent may come back
            body = body.replace(echoed, "")
        for secret in _forbidden(who["roles"]):
            assert secret not in body, f"{surface} as {who['name']} carries {secret!r}"

    def _api(self, who, method: str, path: str, body=None):
        headers = {"Authorization": f"Bearer {who['token']}"}
        if method == "get":
            response = self.client.get(API + path, headers=headers)
        else:
            response = self.client.post(API + path, body or {}, content_type="application/json", headers=headers)
        assert response.status_code < 500, (path, response.content[:500])
        sent = (path, *path.replace("?", "/").replace("&", "/").replace("=", "/").split("/"))
        self._check(who, f"{method.upper()} {path}", response.content.decode(), tuple(p for p in sent if p))
        return response

    def _page(self, who, url: str):
        self.client.force_login(who["user"])
        response = self.client.get(url)
        self.client.logout()
        assert response.status_code < 500, (url, response.status_code)
        content = b"".join(response.streaming_content) if response.streaming else response.content
        sent = (url, *url.replace("?", "/").replace("&", "/").replace("=", "/").split("/"))
        self._check(who, f"page {url}", content.decode(), tuple(p for p in sent if p))
        return response

    def _mcp(self, who, tool: str, arguments: dict):
        from governance.mcp_server import TOKEN_ENV, build_server

        os.environ[TOKEN_ENV] = who["token"]

        async def call():
            async with Client(build_server()) as client:
                return await client.call_tool(tool, arguments)

        try:
            result = anyio.run(call)
        finally:
            os.environ.pop(TOKEN_ENV, None)
        body = json.dumps(result.structured_content or {}) + " ".join(
            getattr(c, "text", "") for c in result.content or []
        )
        self._check(who, f"mcp {tool}", body, tuple(str(v) for v in arguments.values()))
        return result

    # --- rules ----------------------------------------------------------------------------------

    principal = st.integers(min_value=0, max_value=100)
    unit_ids = st.sampled_from(["r1", "o1", "o0", "n1", "farunit-0", "farunit-3", "p1"])

    def _who(self, index: int) -> dict:
        return self.principals[index % len(self.principals)]

    @rule(target=traces, who=principal, project=st.sampled_from(["tlab", "tother", "far"]),
          query=st.sampled_from(QUERIES), budget=st.sampled_from([130, 400]), mcp=st.booleans())  # fmt: skip
    def select(self, who, project, query, budget, mcp):
        who = self._who(who)
        arguments = {"project": project, "query": query, "budget_tokens": budget}
        if mcp:
            result = self._mcp(who, "select", arguments)
            return (result.structured_content or {}).get("trace_id", 0) if not result.is_error else 0
        response = self._api(who, "post", "/select", arguments)
        return response.json()["trace_id"] if response.status_code == 200 else 0

    @rule(who=principal, trace=traces, surface=st.sampled_from(["api", "mcp", "page", "json", "csv"]))
    def trace_read(self, who, trace, surface):
        who = self._who(who)
        if not trace:
            return
        if surface == "api":
            self._api(who, "get", f"/traces/{trace}")
        elif surface == "mcp":
            self._mcp(who, "get_trace", {"trace_id": trace})
        elif surface == "page":
            self._page(who, f"/traces/{trace}/")
        else:
            self._page(who, f"/traces/{trace}/export.{surface}")

    @rule(who=principal, unit=unit_ids, project=st.sampled_from(["", "tlab", "tother", "far"]), page=st.booleans())
    def search(self, who, unit, project, page):
        who = self._who(who)
        if page:
            self._page(who, f"/traces/export.json?unit={unit}&project={project}")
        else:
            self._api(who, "get", f"/traces?unit={unit}&project={project}")

    @rule(who=principal, a=traces, b=traces)
    def diff(self, who, a, b):
        if a and b:
            self._api(self._who(who), "get", f"/traces/{a}/diff/{b}")

    @rule(who=principal, trace=traces, unit=unit_ids, mcp=st.booleans())
    def counterfactual(self, who, trace, unit, mcp):
        who = self._who(who)
        if not trace:
            return
        if mcp:
            self._mcp(who, "explain_unit", {"trace_id": trace, "unit_id": unit})
        else:
            self._api(who, "get", f"/traces/{trace}/counterfactual/{unit}")

    @rule(who=principal, trace=traces)
    def label(self, who, trace):
        from selection.models import Trace, TraceCandidate

        if not trace:
            return
        own = Trace.objects.filter(pk=trace).values_list("project__slug", flat=True).first()
        # a unit of the trace's own project: what a labeller saw and sends back
        uid = TraceCandidate.objects.filter(trace_id=trace, project_slug=own).values_list("unit_uid", flat=True).first()
        if uid:
            self._api(self._who(who), "post", f"/traces/{trace}/task", {"labels": {uid: "MUST"}})

    @rule(who=principal, trace=traces, verdict=st.sampled_from(["helped", "missed"]))
    def outcome(self, who, trace, verdict):
        if trace:
            self._api(self._who(who), "post", f"/traces/{trace}/outcomes", {"verdict": verdict})

    @rule(who=principal, project=st.sampled_from(["tlab", "far"]), pull=st.integers(min_value=1, max_value=9))
    def propose(self, who, project, pull):
        self._api(
            self._who(who), "post", "/proposals", {"project": project, "title": "t", "patch": {"class_pull": pull}}
        )

    @rule(who=principal, project=st.sampled_from(["tlab", "far"]))
    def webhooks_read(self, who, project):
        self._api(self._who(who), "get", f"/projects/{project}/webhooks")

    @invariant()
    def webhook_payloads_stay_in_their_project(self):
        from governance.models import WebhookDelivery

        for delivery in WebhookDelivery.objects.select_related("endpoint__project"):
            body = json.dumps(delivery.payload)
            for secret in _forbidden({delivery.endpoint.project.slug}):
                assert secret not in body, f"a webhook payload of {delivery.endpoint.project.slug} carries {secret!r}"


def test_no_answer_carries_a_unit_of_a_project_its_caller_holds_no_role_in(tenants, client):
    TenantMachine.world = tenants
    TenantMachine.client = client
    TenantMachine.steps = 0
    run_state_machine_as_test(
        TenantMachine,
        settings=settings(
            max_examples=max(1, STEPS // STEPS_PER_RUN),
            stateful_step_count=STEPS_PER_RUN,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    print(f"\ntenant state machine: {TenantMachine.steps} calls checked, no leak")
    assert TenantMachine.steps > 0
