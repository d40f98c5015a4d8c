"""POST /select and the trace explorer over HTTP, with tokens, against the real database."""

from __future__ import annotations

from tests.api.conftest import assert_problem

FAILING_TEST = {
    "project": "sift",
    "signals": [
        {"id": "s1", "kind": "failing_test", "content": "test_tokenizer_handles_unicode fails with IndexError"}
    ],
    "query": "tokenizer unicode IndexError",
    "budget_tokens": 600,
}


def test_anonymous_select_gets_401_problem_details(api, context_lab):
    response = api().post("/select", FAILING_TEST)
    doc = assert_problem(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert doc["instance"] == "/api/v1/select"


def test_a_bad_token_is_401_not_anonymous_access(api, context_lab):
    assert_problem(api("fg_deadbeef_nope").get("/traces"), 401)


def test_an_unknown_api_path_is_a_problem_too(api, db):
    assert assert_problem(api().get("/no/such/thing"), 404)["instance"] == "/api/v1/no/such/thing"


def test_select_returns_the_bundle_and_a_searchable_trace(api, people, token_for):
    agent = api(token_for(people["lead"], "sift", "lead"))
    response = agent.post("/select", FAILING_TEST)
    assert response.status_code == 200, response.content
    body = response.json()
    bundle, diagnostics = body["bundle"], body["diagnostics"]
    assert bundle["items"] and bundle["tokens"] <= 600
    assert bundle["sources"][0] == bundle["items"][0]["sources"][0]
    assert diagnostics["candidates"] == diagnostics["admitted"] + diagnostics["rejected"]
    assert sum(diagnostics["reasons"].values()) == diagnostics["candidates"]

    found = agent.get("/traces", source="api").json()
    assert [t["id"] for t in found["results"]] == [body["trace_id"]]
    trace = agent.get(f"/traces/{body['trace_id']}").json()
    assert trace["bundle_digest"] == bundle["digest"]
    assert trace["trace"]["work_frame"]["signals"][0]["kind"] == "failing_test"
    assert body["trace_url"] == f"/api/v1/traces/{body['trace_id']}"


def test_select_validation_errors_name_the_field(api, people, token_for):
    agent = api(token_for(people["lead"], "sift", "lead"))
    doc = assert_problem(agent.post("/select", {**FAILING_TEST, "budget_tokens": -5}), 422)
    assert doc["errors"][0]["location"][-1] == "budget_tokens"
    doc = assert_problem(
        agent.post("/select", {**FAILING_TEST, "signals": [{"id": "x", "kind": "gossip", "content": "a"}]}), 422
    )
    assert doc["errors"][0]["location"][-3:] == ["signals", 0, "kind"]
    assert_problem(agent.post("/select", {"project": "sift"}), 422)  # neither query nor signal
    assert_problem(agent.post("/select", {**FAILING_TEST, "condition": "C9"}), 422)
    assert_problem(agent.post("/select", {**FAILING_TEST, "condition": "CO"}), 422)  # the oracle is not for agents
    assert_problem(agent.post("/select", {**FAILING_TEST, "project": "nowhere"}), 404)


def test_a_token_scoped_to_one_project_gets_403_on_another_projects_trace(api, people, token_for):
    both = people["both"]
    quill_trace = api(token_for(both, "quill", "lead")).post("/select", {**FAILING_TEST, "project": "quill"}).json()
    sift_only = api(token_for(both, "sift", "lead"))
    doc = assert_problem(sift_only.get(f"/traces/{quill_trace['trace_id']}"), 403)
    assert "quill" in doc["detail"]
    assert_problem(sift_only.post("/select", {**FAILING_TEST, "project": "quill"}), 403)
    # the history search shows only the token's project, though its owner reads both
    assert sift_only.get("/traces").json()["count"] == 0
    assert api(token_for(both)).get("/traces").json()["count"] == 1  # read-only across both


def test_outsiders_read_nothing(api, people, token_for):
    lead = api(token_for(people["lead"], "sift", "lead"))
    trace_id = lead.post("/select", FAILING_TEST).json()["trace_id"]
    outsider = api(token_for(people["outsider"]))
    assert_problem(outsider.get(f"/traces/{trace_id}"), 403)
    assert outsider.get("/traces").json()["count"] == 0
    assert outsider.get("/projects").json() == []
    assert_problem(outsider.get("/traces/999999"), 404)


def test_verify_diff_and_counterfactual(api, people, token_for):
    auditor = api(token_for(people["auditor"], "sift", "auditor"))
    lead = api(token_for(people["lead"], "sift", "lead"))
    a = lead.post("/select", FAILING_TEST).json()
    b = lead.post("/select", {**FAILING_TEST, "budget_tokens": 200}).json()

    verified = auditor.post(f"/traces/{a['trace_id']}/verify").json()
    assert verified["stored_ok"] and verified["rerun_ok"], verified

    diff = auditor.get(f"/traces/{a['trace_id']}/diff/{b['trace_id']}").json()
    assert not diff["same_bundle"]
    assert set(diff["dropped"]) <= set(a["bundle"]["sources"])

    trace = auditor.get(f"/traces/{b['trace_id']}").json()["trace"]
    omitted = next(c["unit_id"] for c in trace["candidates"] if c["disposition"] == "budget_omitted")
    report = auditor.get(f"/traces/{b['trace_id']}/counterfactual/{omitted}").json()
    assert report["disposition"] == "budget_omitted"
    budget = next(o for o in report["options"] if o["kind"] == "budget")
    assert budget["found"] and budget["value"] > 0
    assert_problem(auditor.get(f"/traces/{b['trace_id']}/counterfactual/no-such-unit"), 404)


def test_session_auth_needs_the_csrf_token_for_writes(context_lab, people):
    from django.test import Client

    anonymous = Client(enforce_csrf_checks=True)
    assert_problem(anonymous.post("/api/v1/select", FAILING_TEST, content_type="application/json"), 401)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(people["lead"])
    assert browser.get("/api/v1/traces").status_code == 200
    refused = browser.post("/api/v1/select", FAILING_TEST, content_type="application/json")
    assert_problem(refused, 403)
    browser.get("/settings/tokens/")  # sets the csrftoken cookie
    csrf = browser.cookies["csrftoken"].value
    accepted = browser.post(
        "/api/v1/select", FAILING_TEST, content_type="application/json", headers={"X-CSRFToken": csrf}
    )
    assert accepted.status_code == 200, accepted.content


def test_strict_routing_refuses_with_409_and_the_traced_diagnostics(api, people, token_for):
    agent = api(token_for(people["lead"], "sift", "lead"))
    relaxed = agent.post("/select", FAILING_TEST)
    assert relaxed.status_code == 200, relaxed.content
    routing = relaxed.json()["routing"]
    assert routing["completeness"] == "INCOMPLETE"  # sift routes areas by path, and none was given
    assert any(d["reason"] == "SKIP_SCOPE_MISSING" for d in routing["dispositions"])
    doc = assert_problem(agent.post("/select", {**FAILING_TEST, "strict": True}), 409)
    assert doc["routing"]["completeness"] == "INCOMPLETE" and doc["routing"]["refused"]
    refused = agent.get(f"/traces/{doc['trace_id']}").json()  # the refusal is itself traced
    assert refused["trace"]["routing"]["refused"] is True
    assert refused["bundle_tokens"] == 0


def test_select_takes_a_builder_and_refuses_unknown_work_types_and_builders(api, people, token_for):
    agent = api(token_for(people["lead"], "sift", "lead"))
    built = agent.post("/select", {**FAILING_TEST, "builder": "cue"})
    assert built.status_code == 200, built.content
    frame = agent.get(f"/traces/{built.json()['trace_id']}").json()["trace"]["work_frame"]
    assert frame["builder"] == "cue"
    assert frame["establishment"] in ("inferred-confident", "inferred-ambiguous", "unknown")
    doc = assert_problem(agent.post("/select", {**FAILING_TEST, "work_frame": {"work_type": "runbok"}}), 422)
    assert "runbok" in doc["detail"]
    assert_problem(agent.post("/select", {**FAILING_TEST, "builder": "tarot"}), 422)


def test_a_method_an_operation_does_not_take_is_a_problem_too(client, db):
    response = client.put("/api/v1/select", data="{}", content_type="application/json")
    doc = assert_problem(response, 405)
    assert doc["detail"] == "PUT is not allowed here"
    assert "POST" in response["Allow"]
