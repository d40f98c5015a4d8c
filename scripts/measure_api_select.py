"""Time POST /api/v1/select on the fixture corpus through Django's test client: p50 and p95.

    .venv/bin/python scripts/measure_api_select.py [--runs 60] [--repeat-queries]

Builds its own throwaway test database (FG_TEST_DATABASE_NAME, default test_fg_measure_api),
imports fixtures/context-lab through corpus_import with the real embedding model, gives a user
the lead role on sift and a personal API token scoped to it, then posts one selection per run:
each sift task's query and a failing-test signal, the query made unique per run so every request
embeds its text (--repeat-queries reuses the task queries, which the process caches), each stored
as a trace. Not a timed test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("FG_TEST_DATABASE_NAME", "test_fg_measure_api")
os.environ.setdefault("FG_QUIET_EMBEDDED", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--repeat-queries", action="store_true")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_test_environment

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        measure(args.runs, args.repeat_queries)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def measure(runs: int, repeat: bool) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from authority.models import RoleGrant
    from governance.tokens import services as tokens
    from selection.memory.importing import corpus_import
    from selection.models import Project, Task

    corpus_import(REPO / "fixtures" / "context-lab")
    sift = Project.objects.get(slug="sift")
    lead = get_user_model().objects.create_user("measure-lead")
    RoleGrant.objects.create(user=lead, project=sift, role="lead")
    secret = tokens.token_create(user=lead, name="measure", project=sift, role="lead").secret
    queries = list(Task.objects.filter(project=sift).order_by("position").values_list("query", flat=True))
    client = Client(headers={"Authorization": f"Bearer {secret}"})

    def post(i: int):
        query = queries[i % len(queries)] if repeat else f"{queries[i % len(queries)]} (request {i})"
        body = {
            "project": "sift",
            "query": query,
            "signals": [{"id": "t1", "kind": "failing_test", "content": f"test_case_{i % 7} fails"}],
            "budget_tokens": 1200,
        }
        return client.post("/api/v1/select", body, content_type="application/json")

    assert post(-1).status_code == 200  # warm-up: the model, the corpus index, the frame
    samples = []
    candidates = []
    for i in range(runs):
        start = time.perf_counter()
        response = post(i)
        samples.append(time.perf_counter() - start)
        assert response.status_code == 200, response.content[:500]
        candidates.append(response.json()["diagnostics"]["candidates"])
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    print(
        f"POST /api/v1/select on context-lab/sift ({'repeated' if repeat else 'unique'} queries, "
        f"{statistics.mean(candidates):.0f} candidates on average, each traced): runs {len(samples)}  "
        f"p50 {statistics.median(samples) * 1000:.1f} ms  p95 {p95 * 1000:.1f} ms  max {samples[-1] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
