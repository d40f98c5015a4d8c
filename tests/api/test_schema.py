"""The API's contract: the OpenAPI document is snapshotted, its docs are served locally, and a
schemathesis run over it (authenticated as a lead) finds no 5xx and no answer outside the schema.

After an intended change to the API, rewrite the snapshot and commit it with the change:

    FG_UPDATE_OPENAPI_SNAPSHOT=1 .venv/bin/pytest tests/api/test_schema.py -k snapshot
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.api.conftest import API

SNAPSHOT = Path(__file__).with_name("openapi.json")
UPDATE = os.environ.get("FG_UPDATE_OPENAPI_SNAPSHOT") == "1"
ENDPOINTS = {
    ("post", "/api/v1/select"),
    ("get", "/api/v1/traces"),
    ("get", "/api/v1/traces/{trace_id}"),
    ("get", "/api/v1/traces/{a}/diff/{b}"),
    ("post", "/api/v1/traces/{trace_id}/verify"),
    ("get", "/api/v1/traces/{trace_id}/counterfactual/{unit}"),
    ("get", "/api/v1/projects"),
    ("get", "/api/v1/projects/{slug}/frames"),
    ("get", "/api/v1/projects/{slug}/frames/{number}"),
    ("get", "/api/v1/projects/{slug}/frames/diff"),
    ("get", "/api/v1/projects/{slug}/health"),
    ("post", "/api/v1/proposals"),
    ("get", "/api/v1/proposals/{proposal_id}"),
    ("get", "/api/v1/backtests/{backtest_id}"),
    ("post", "/api/v1/backtests/{backtest_id}/reviews"),
    ("post", "/api/v1/proposals/{proposal_id}/promotion"),
    ("post", "/api/v1/proposals/{proposal_id}/split"),
    ("post", "/api/v1/proposals/{proposal_id}/rebase"),
    ("post", "/api/v1/proposals/{proposal_id}/close"),
    ("post", "/api/v1/rollbacks"),
    ("post", "/api/v1/proposals/{proposal_id}/comments"),
    ("get", "/api/v1/proposals/{proposal_id}/timeline"),
    ("post", "/api/v1/traces/{trace_id}/task"),
    ("post", "/api/v1/corpora"),
    ("get", "/api/v1/corpora"),
    ("get", "/api/v1/corpora/{name}/evaluations"),
    ("post", "/api/v1/corpora/{name}/evaluations"),
    ("get", "/api/v1/evaluations/{evaluation_id}"),
    ("post", "/api/v1/traces/{trace_id}/outcomes"),
    ("get", "/api/v1/jobs/{job_id}"),
    ("get", "/api/v1/audit"),
    ("get", "/api/v1/health"),
    ("post", "/api/v1/projects/{slug}/units"),
    ("get", "/api/v1/projects/{slug}/units/{uid}"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/supersede"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/refute"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/echo"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/support"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/close-loop"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/reopen-loop"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/admit"),
    ("post", "/api/v1/projects/{slug}/units/{uid}/decline"),
    ("get", "/api/v1/health/live"),
    ("get", "/api/v1/health/ready"),
    ("get", "/api/v1/projects/{slug}/webhooks"),
    ("post", "/api/v1/projects/{slug}/webhooks"),
    ("post", "/api/v1/projects/{slug}/webhooks/{webhook_id}/secret"),
}


def _served_schema(client) -> dict:
    """The schema as a signed-in user reads it (it answers no one else: test_role_matrix.py)."""
    from django.contrib.auth import get_user_model

    reader, _ = get_user_model().objects.get_or_create(username="schema-reader")
    client.force_login(reader)
    response = client.get(f"{API}/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_openapi_lists_every_endpoint_of_the_issue(client, db):
    paths = _served_schema(client)["paths"]
    served = {(method, path) for path, operations in paths.items() for method in operations}
    assert ENDPOINTS <= served, sorted(ENDPOINTS - served)


def test_openapi_matches_the_committed_snapshot(client, db):
    schema = _served_schema(client)
    rendered = json.dumps(schema, indent=1, sort_keys=True) + "\n"
    if UPDATE:
        SNAPSHOT.write_text(rendered)
    assert SNAPSHOT.exists(), "no snapshot yet: run with FG_UPDATE_OPENAPI_SNAPSHOT=1"
    assert json.loads(SNAPSHOT.read_text()) == schema, (
        "the API schema changed; if intended, run FG_UPDATE_OPENAPI_SNAPSHOT=1 "
        ".venv/bin/pytest tests/api/test_schema.py -k snapshot and commit tests/api/openapi.json"
    )


def test_errors_are_documented_as_problem_details(client, db):
    schema = _served_schema(client)
    select = schema["paths"]["/api/v1/select"]["post"]["responses"]
    for status in ("401", "403", "404", "422"):
        assert "application/problem+json" in select[status]["content"]


def test_docs_are_served_from_local_static_files(client, db):
    _served_schema(client)  # signs in
    page = client.get(f"{API}/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower() and "unpkg" not in page.lower()


# Each operation gets this many generated cases; the whole run stays under ~2 minutes on a
# two-core machine. FG_SCHEMATHESIS_CASES raises it for a longer, local hunt.
CASES_PER_OPERATION = int(os.environ.get("FG_SCHEMATHESIS_CASES", "12"))


def test_schemathesis_finds_no_server_error_and_no_schema_violation(people, token_for, capsys):
    import schemathesis
    from django.core import signals
    from django.db import close_old_connections

    from config.wsgi import application

    token = token_for(people["lead"], "sift", "lead")
    # as Django's test client does: requests must not close the test's connection (its transaction)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        operations, cases, failures = _fuzz(schemathesis, application, token)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    with capsys.disabled():
        print(f"\nschemathesis: {operations} operations, {cases} cases, {len(failures)} failures")
    assert operations == len(ENDPOINTS)
    assert not failures, "\n\n".join(failures[:10])


def _fuzz(schemathesis, application, token):
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis import checks as st_checks

    schema = schemathesis.openapi.from_wsgi(
        f"{API}/openapi.json", application, headers={"Authorization": f"Bearer {token}"}
    )
    chosen = [
        st_checks.not_a_server_error,
        st_checks.status_code_conformance,
        st_checks.content_type_conformance,
        st_checks.response_schema_conformance,
    ]
    counted = {"cases": 0}
    failures: list[str] = []

    def fuzz(operation) -> None:
        @settings(
            max_examples=CASES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def run(case):
            counted["cases"] += 1
            try:
                case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=chosen)
            except Exception as error:  # noqa: BLE001 - every failure is collected and reported
                failures.append(f"{operation.label}: {error}"[:3000])

        run()

    operations = 0
    for result in schema.get_all_operations():
        fuzz(result.ok())
        operations += 1
    return operations, counted["cases"], failures
