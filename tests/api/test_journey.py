"""The README's worked example, end to end through a real Celery worker: a token from the command,
a selection for a failing test, its trace, a proposal, its backtest, the review, the promotion."""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command

from tests.api.conftest import ApiClient

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# passes its gates on context-lab, as the README's example needs: the looser stop rule lets in the
# interleaving protocol t2-eval-sift needs (fixtures/context-lab/proposals.yaml, looser-stop-rule),
# and design review drops design notes (tests/backtest/test_browser_journey.py)
PATCH = {
    "admission": {"floor": 0.4, "tier_cap": 7},
    "work_types": {
        "design-review": {"classes": ["design_principle", "baseline_measurement", "experiment_result", "eval_protocol"]}
    },
}


def _token(capsys, *args) -> str:
    capsys.readouterr()
    call_command("api_token", *args)
    return capsys.readouterr().out.strip()


def _wait(client: ApiClient, url: str, timeout: float = 240.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        doc = client.get(url).json()
        if doc["status"] in ("finished", "error"):
            return doc
        assert time.monotonic() < deadline, f"{url} still {doc['status']} after {timeout} s"
        time.sleep(0.5)


def test_the_readme_journey(celery_worker_process, client, sift_users, capsys):
    lead = ApiClient(client, _token(capsys, "lead", "--project", "sift", "--role", "lead"))
    reviewer = ApiClient(client, _token(capsys, "reviewer", "--project", "sift", "--role", "reviewer"))

    selected = lead.post(
        "/select",
        {
            "project": "sift",
            "signals": [
                {"id": "t1", "kind": "failing_test", "content": "test_smoke_retrieval fails after the config change"}
            ],
            "budget_tokens": 800,
        },
    )
    assert selected.status_code == 200, selected.content
    trace = lead.get(selected.json()["trace_url"].removeprefix("/api/v1")).json()
    assert trace["source"] == "api" and trace["trace"]["candidates"]

    proposed = lead.post(
        "/proposals", {"project": "sift", "title": "Loosen the stop rule; design review drops notes", "patch": PATCH}
    )
    assert proposed.status_code == 201, proposed.content
    backtest_url = proposed.json()["backtests"][0]["url"].removeprefix("/api/v1")
    backtest = _wait(lead, backtest_url)
    assert backtest["status"] == "finished", backtest["error"]
    assert backtest["decision"]["gates"] and all(g["reason"] for g in backtest["decision"]["gates"])
    assert backtest["progress"]["done"] == backtest["progress"]["total"]

    assert backtest["decision"]["passed"], backtest["decision"]
    # as the README does: each task that got worse is acknowledged
    reviewed = reviewer.post(
        f"{backtest_url}/reviews",
        {
            "verdict": "approve",
            "comment": "checked the per-task deltas",
            "acknowledged": [r["task"] for r in backtest["regressed_tasks"]],
        },
    )
    assert reviewed.status_code == 201, reviewed.content
    promoted = lead.post(f"/proposals/{proposed.json()['id']}/promotion")
    assert promoted.status_code == 201, promoted.content
    assert lead.get("/projects/sift/frames").json()[0]["current"]
    evaluation = lead.post("/corpora/context-lab/evaluations", {"conditions": ["C0", "C6"]})
    assert evaluation.status_code == 202
    job = _wait(lead, evaluation.json()["url"].removeprefix("/api/v1"))
    assert job["status"] == "finished", job["error"]
    assert lead.get(job["result_url"].removeprefix("/api/v1")).json()["conditions"] == ["C0", "C6"]
