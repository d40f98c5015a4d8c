"""Another project's units reach a reader without a role in it by id, project and class only: on every
page, export and API answer that shows a trace, an evaluation or a backtest.

The corpus: project tlab's frame scope takes in project tother, whose unit o1 is admitted and whose
superseded unit o0 becomes a supersession note on tlab's r1 (so a tlab item names a tother title).
`reader` is a lead of tlab only; `insider` also holds a role in tother.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from authority.models import RoleGrant
from selection.models import Project, Trace
from tests.selection.test_traces import (
    LAB_CORPUS,
    LAB_PROPOSALS,
    LAB_TASKS,
    LAB_UNITS,
    _unit,
    embedding_cache,  # noqa: F401 - module-wide vectors
)

SECRET_TEXT = "Other project ranking budget rule"  # o1's text
SECRET_TITLE = "Confidential pricing of the other team"  # o1's title
OLD_TEXT = "Outdated other ranking budget rule kept for the record"  # o0's text
OLD_TITLE = "Confidential old pricing"  # o0's title: named in the note on tlab's r1
SECRETS = (SECRET_TEXT, SECRET_TITLE, OLD_TEXT, OLD_TITLE)
REDACTED = "[redacted: you hold no role in project tother]"


def _units() -> list[dict]:
    units = []
    for unit in LAB_UNITS:
        unit = dict(unit)
        if unit["id"] == "o1":
            unit["title"] = SECRET_TITLE
        if unit["id"] == "r1":
            unit["supersedes"] = ["r0", "o0"]
        units.append(unit)
    units.append(_unit("o0", "rule", OLD_TEXT, project="tother", title=OLD_TITLE, valid_to="2026-06-01T00:00:00Z"))
    return units


@pytest.fixture
def wide(db, tmp_path, django_user_model):
    from selection.memory.importing import corpus_import

    directory = tmp_path / "wide"
    directory.mkdir()
    (directory / "corpus.yaml").write_text(LAB_CORPUS.replace("scope: [tlab]", "scope: [tlab, tother]"), "utf-8")
    (directory / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in _units()), "utf-8")
    (directory / "tasks.yaml").write_text(LAB_TASKS, "utf-8")
    (directory / "proposals.yaml").write_text(LAB_PROPOSALS, "utf-8")
    corpus = corpus_import(directory)
    tlab, tother = Project.objects.get(slug="tlab"), Project.objects.get(slug="tother")
    reader = django_user_model.objects.create_user("reader")
    insider = django_user_model.objects.create_user("insider")
    RoleGrant.objects.create(user=reader, project=tlab, role="lead")
    RoleGrant.objects.create(user=insider, project=tlab, role="lead")
    RoleGrant.objects.create(user=insider, project=tother, role="auditor")
    return {"corpus": corpus, "tlab": tlab, "reader": reader, "insider": insider}


def select(wide, budget: int) -> Trace:
    from selection.memory import store
    from selection.models import Task
    from selection.serving import selections as services

    task = Task.objects.get(corpus=wide["corpus"], uid="t-review")
    return services.run_selection(
        project=wide["tlab"],
        query=task.query,
        work_frame=store.work_frame_for_task(task),
        budget_tokens=budget,
        condition="C6",
        standpoint=task.standpoint,
        task=task,
        source="select",
        use_dense=False,
    ).trace


@pytest.fixture
def traces(wide):
    roomy, tight = select(wide, 400), select(wide, 130)
    assert "o1" in roomy.admitted and "r1" in roomy.admitted, roomy.admitted
    header = json.dumps(roomy.header) + json.dumps(roomy.bundle)
    missing = [secret for secret in (SECRET_TEXT, SECRET_TITLE, OLD_TITLE) if secret not in header]
    assert not missing, f"the stored trace lacks {missing}"
    return roomy, tight


def assert_redacted(surface: str, body: str, *, ids: tuple[str, ...] = ("o1",)) -> None:
    for secret in SECRETS:
        assert secret not in body, f"{surface} shows {secret!r}"
    for uid in ids:
        assert uid in body, f"{surface} lost the unit id {uid}"


def _get(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def test_the_trace_page_bundle_redacts_what_an_insider_reads_in_full(wide, traces, client):
    roomy, _ = traces
    client.force_login(wide["reader"])
    page = _get(client, reverse("trace-detail", args=[roomy.pk]))
    assert_redacted("trace page", page)
    assert REDACTED in page and "<code>o1</code>" in page and "tother" in page
    assert "1 item of projects you hold no role in is shown by id, project and class only" in page
    assert "o0, superseded by r1" in page  # the note on tlab's own item names the tother unit by id
    client.force_login(wide["insider"])
    page = _get(client, reverse("trace-detail", args=[roomy.pk]))
    assert SECRET_TEXT in page and SECRET_TITLE in page and OLD_TITLE in page and "redacted" not in page


@pytest.mark.parametrize(
    "surface",
    [
        "candidate table",
        "near misses",
        "counterfactual",
        "diff",
        "then and now",
        "verify",
        "history unit search",
    ],
)
def test_each_trace_page_shows_other_projects_units_by_id_only(wide, traces, client, surface):
    roomy, tight = traces
    client.force_login(wide["reader"])
    urls = {
        "candidate table": reverse("trace-detail", args=[roomy.pk]) + "?project=tother&details=1",
        "near misses": reverse("trace-detail", args=[tight.pk]),
        "counterfactual": reverse("trace-counterfactual", args=[tight.pk, "o1"]),
        "diff": reverse("trace-diff") + f"?a={tight.pk}&b={roomy.pk}",
        "then and now": reverse("trace-now", args=[roomy.pk]) + f"?replay={tight.pk}",
        "verify": reverse("trace-verify", args=[roomy.pk]),
        "history unit search": reverse("trace-list") + "?unit=o1",
    }
    body = _get(client, urls[surface])
    assert_redacted(
        surface, body, ids=() if surface in ("verify", "history unit search", "diff", "then and now") else ("o1",)
    )


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_trace_and_search_exports_redact(wide, traces, client, fmt):
    roomy, _ = traces
    client.force_login(wide["reader"])
    body = _get(client, reverse("trace-export", args=[roomy.pk, fmt]))
    assert_redacted(f"trace export .{fmt}", body)
    if fmt == "json":
        notes = [op["note"] for op in json.loads(body)["coalescing"] if op["op"] == "supersession_note"]
        assert "o0, superseded by r1" in notes, notes
    body = _get(client, reverse("trace-search-export", args=[fmt]) + "?unit=o1")
    assert_redacted(f"trace search export .{fmt}", body, ids=("o1",))


def test_the_api_and_mcp_documents_redact(wide, traces, client):
    from governance.tokens import services as tokens
    from selection.traces.api import trace_document

    roomy, tight = traces
    secret = tokens.token_create(user=wide["reader"], name="agent", project=wide["tlab"], role="lead").secret
    headers = {"Authorization": f"Bearer {secret}"}

    def api(method: str, path: str, body=None) -> str:
        if method == "post":
            response = client.post("/api/v1" + path, body or {}, content_type="application/json", headers=headers)
        else:
            response = client.get("/api/v1" + path, headers=headers)
        assert response.status_code == 200, (path, response.content[:500])
        return response.content.decode()

    doc = api("get", f"/traces/{roomy.pk}")
    assert_redacted("API trace", doc)
    item = next(i for i in json.loads(doc)["bundle"]["items"] if i["project"] == "tother")
    assert item["text"] == REDACTED and item["sources"] == ["o1"] and item["evidence_class"] == "rule"
    assert_redacted("API trace diff", api("get", f"/traces/{tight.pk}/diff/{roomy.pk}"))
    assert_redacted("API counterfactual", api("get", f"/traces/{tight.pk}/counterfactual/o1"))
    assert_redacted("API trace search", api("get", "/traces?unit=o1"), ids=())
    selected = api(
        "post",
        "/select",
        {"project": "tlab", "query": "How should the ranking budget rule be reviewed?", "budget_tokens": 400},
    )
    assert_redacted("API select", selected)
    assert REDACTED in selected
    # the MCP tool returns the same document, redacted for the token's user
    assert_redacted("MCP get_trace", json.dumps(trace_document(roomy, user=wide["reader"]), default=str))
    insider = json.dumps(trace_document(roomy, user=wide["insider"]), default=str)
    assert SECRET_TEXT in insider and OLD_TITLE in insider


def test_evaluation_and_backtest_pages_and_api_redact(wide, traces, client):
    from backtest import judging
    from backtest import services as backtest_services
    from backtest.replay import dispatch
    from backtest.replay import services as replays
    from governance.models import Proposal
    from selection.evaluation.ladder import evaluation_run

    evaluation = evaluation_run(corpus=wide["corpus"], conditions="C0,C6")
    assert any("o1" in run.trace.admitted for run in evaluation.runs.select_related("trace"))
    backtest = backtest_services.backtest_enqueue(
        proposal=Proposal.objects.get(uid="notes-first"), requested_by=None, shadow=0
    )
    for task_id in backtest.task_ids:
        for side in dispatch.replay_sides(backtest):
            replays.replay_one(backtest_id=backtest.pk, task_id=task_id, side=side)
    judging.backtest_finish(backtest_id=backtest.pk)

    client.force_login(wide["reader"])
    assert_redacted("evaluation page", _get(client, reverse("evaluation-detail", args=[evaluation.pk])), ids=())
    assert_redacted("backtest page", _get(client, reverse("backtest-detail", args=[backtest.pk])), ids=())
    assert_redacted("proposal page", _get(client, reverse("proposal-detail", args=[backtest.proposal_id])), ids=())
    for run in evaluation.runs.filter(trace__admitted__contains=["o1"]).select_related("trace")[:1]:
        assert_redacted("evaluation run's trace", _get(client, reverse("trace-detail", args=[run.trace_id])))
    from governance.tokens import services as tokens

    secret = tokens.token_create(user=wide["reader"], name="agent", project=None, role=None).secret
    response = client.get(f"/api/v1/evaluations/{evaluation.pk}", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200, response.content[:500]
    assert_redacted("API evaluation", response.content.decode(), ids=())
