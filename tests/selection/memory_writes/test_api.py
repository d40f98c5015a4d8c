"""The memory write routes: the same services through the API, as problem details on refusal."""

from __future__ import annotations

from tests.api.conftest import API, assert_problem
from tests.selection.memory_writes.conftest import counts

NOTE = {"class": "design_note", "title": "Judged set refresh", "text": "Refresh the judged set every quarter."}


def _post(client, path, body, token, **headers):
    return client.post(API + path, body, content_type="application/json",
                       headers={"Authorization": f"Bearer {token}", **headers})  # fmt: skip


def test_an_agent_token_writes_and_reads_a_unit(client, sift, agent_token):
    from selection.models import MemoryChange

    response = _post(client, "/projects/sift/units", NOTE, agent_token)
    assert response.status_code == 201, response.content
    doc = response.json()
    assert doc["status"] == "active" and doc["action"] == "unit.created"
    assert MemoryChange.objects.get(unit__uid=doc["unit"]).via == "api"
    read = client.get(f"{API}/projects/sift/units/{doc['unit']}", headers={"Authorization": f"Bearer {agent_token}"})
    assert read.status_code == 200
    unit = read.json()
    assert unit["record"]["text"] == NOTE["text"] and [c["kind"] for c in unit["changes"]] == ["created"]


def test_the_same_idempotency_key_answers_once_and_another_body_is_409(client, sift, agent_token):
    first = _post(client, "/projects/sift/units", NOTE, agent_token, **{"Idempotency-Key": "retry-1"})
    assert first.status_code == 201
    before = counts()
    again = _post(client, "/projects/sift/units", NOTE, agent_token, **{"Idempotency-Key": "retry-1"})
    assert again.status_code == 201 and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and counts() == before
    other = _post(client, "/projects/sift/units", {**NOTE, "text": "else"}, agent_token,
                  **{"Idempotency-Key": "retry-1"})  # fmt: skip
    doc = assert_problem(other, 409)
    assert "Idempotency-Key" in doc["detail"] and counts() == before


def test_a_write_to_a_project_the_token_does_not_hold_is_403_and_zero_rows(client, sift, agent_token):
    before = counts()
    doc = assert_problem(_post(client, "/projects/quill/units", NOTE, agent_token), 403)
    assert "write memory in quill" in doc["detail"] and counts() == before


def test_an_invalid_unit_is_422_naming_the_field(client, sift, agent_token):
    before = counts()
    doc = assert_problem(_post(client, "/projects/sift/units", {**NOTE, "supersedes": ["nowhere"]}, agent_token), 422)
    assert doc["errors"][0]["location"][:2] == ["body", "supersedes"] and "nowhere" in doc["detail"]
    doc = assert_problem(_post(client, "/projects/sift/units", {**NOTE, "class": "runbok"}, agent_token), 422)
    assert doc["errors"][0]["location"] == ["body", "class"]
    assert counts() == before


def test_supersede_refute_and_a_conflict_through_the_api(client, sift, agent_token):
    clash = {**NOTE, "subject": "ship-rule", "facet": "criterion"}
    before = counts()
    doc = assert_problem(_post(client, "/projects/sift/units", clash, agent_token), 409)
    assert "sf-rule-beat-baseline" in doc["detail"] and counts() == before
    superseded = _post(client, "/projects/sift/units/sf-rule-beat-baseline/supersede", clash, agent_token)
    assert superseded.status_code == 201 and superseded.json()["closed"] == ["sf-rule-beat-baseline"]
    refuted = _post(client, "/projects/sift/units/sf-rule-segments/refute", {"unit": NOTE}, agent_token)
    assert refuted.status_code == 201 and refuted.json()["links"] == {"refutes": ["sf-rule-segments"]}
    assert_problem(_post(client, "/projects/sift/units/sf-rule-segments/support", {}, agent_token), 422)


def test_an_agent_token_does_nothing_else(client, sift, agent_token):
    headers = {"Authorization": f"Bearer {agent_token}"}
    proposal = client.post(f"{API}/proposals", {"project": "sift", "title": "t", "patch": {"class_pull": 4}},
                           content_type="application/json", headers=headers)  # fmt: skip
    assert "propose a frame change" in assert_problem(proposal, 403)["detail"]
    selected = client.post(f"{API}/select", {"project": "sift", "query": "judged set"},
                           content_type="application/json", headers=headers)  # fmt: skip
    assert selected.status_code == 200
