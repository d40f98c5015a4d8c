"""The pages a reviewer waits on, rendered by Django's test client against the stored bench corpus:
the trace page of a selection with a large candidate pool (about 200 candidates at 10k units), the
evaluation page, the audit log and the trace history. Each page is requested once to warm it (the
templates, the index, the first queries), then timed over `runs` requests; a last request runs
under CaptureQueriesContext to count its SQL queries (the count tests/*/test_page_queries.py pins).

The viewer is the user `bench-pages`, lead and auditor of the bench project (granted through
authority.services.role_grant, idempotent). The evaluation (C0 and C6 over the corpus's tasks) is
run once per stored corpus and reused by later runs; the 200-candidate trace is selected anew each
run through services.selection_run with a wider pool and written through services.trace_write.
"""

from __future__ import annotations

import gzip
import re
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from authority.models import AuditEntry, Role
from authority.services import role_grant
from bench.database import StoredBench
from bench.stats import summary
from selection.engine.types import EngineConfig
from selection.evaluation.ladder import evaluation_run
from selection.memory import store
from selection.models import Evaluation, Task, Trace
from selection.serving import selections as services

USERNAME = "bench-pages"
POOL = 200  # the candidate pool of the trace page's selection (the engine's default is 40)
EVALUATION_CONDITIONS = ("C0", "C6")  # both, so the page shows the comparison and the hazard


def bench_viewer(stored: StoredBench):
    """The bench's reader: lead and auditor of the bench project, created once and reused."""
    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    for role in (Role.LEAD, Role.AUDITOR):
        role_grant(user=user, project=stored.project, role=role)
    return user


def wide_trace(stored: StoredBench) -> Trace:
    """A C6 trace of one of the bench project's tasks, selected with a pool of POOL candidates."""
    task = (
        Task.objects.filter(project=stored.project).select_related("project", "corpus")
        .order_by("position", "uid").first()
    )
    number, frame = services.frame_for(stored.project)
    inputs = services.SelectionInputs(
        project_frame=frame, work_frame=store.work_frame_for_task(task), query=task.query,
        budget_tokens=task.budget_tokens, standpoint=task.standpoint, condition="C6",
    )
    # scope at retrieval off: a small corpus's project holds fewer units than the pool, and the
    # page is timed with out-of-scope candidates among its rows, as a wide unscoped pool has them
    config = EngineConfig(
        pool_size=POOL, lexical_k=POOL + 40, dense_k=POOL + 40, scope_at_retrieval=False
    )
    result = services.selection_run(inputs, store.corpus_index(stored.corpus.pk), config=config)
    return services.trace_write(result, project=stored.project, frame_version=number, task=task,
                                source="bench")


def bench_evaluation(stored: StoredBench) -> tuple[Evaluation, float | None]:
    """The corpus's C0+C6 evaluation, run now (seconds returned) unless an earlier run left one."""
    existing = (
        Evaluation.objects.filter(corpus=stored.corpus, conditions=list(EVALUATION_CONDITIONS))
        .order_by("-id").first()
    )
    if existing is not None:
        return existing, None
    begun = time.perf_counter()
    evaluation = evaluation_run(corpus=stored.corpus, conditions=",".join(EVALUATION_CONDITIONS))
    return evaluation, time.perf_counter() - begun


def time_page(client: Client, url: str, runs: int) -> dict:
    """One warm-up request, `runs` timed ones, then one with its queries captured."""
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url} answered {response.status_code}")
    samples = []
    for _ in range(runs):
        begun = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - begun) * 1e3)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    out = summary(samples)
    out.update(bytes=len(response.content), queries=len(queries.captured_queries))
    out.update(first_visit(response.content))
    return out


ASSET = re.compile(rb'(?:src|href)="/?' + re.escape(settings.STATIC_URL.strip("/").encode()) + rb'/([^"?#]+)"')


def first_visit(html: bytes) -> dict:
    """What a first visit transfers: the page and the static scripts and styles it names, raw and
    gzipped (what a compressing server or CDN sends); a later visit has the assets cached."""
    raw, packed = len(html), len(gzip.compress(html))
    for name in dict.fromkeys(m.decode() for m in ASSET.findall(html)):
        path = finders.find(name)
        if path is None:
            continue
        with open(path, "rb") as asset:
            data = asset.read()
        raw, packed = raw + len(data), packed + len(gzip.compress(data))
    return {"first_visit_bytes": raw, "first_visit_gzip_bytes": packed}


def time_pages(stored: StoredBench, runs: int) -> dict:
    """The four pages' p50/p95, response bytes and query counts, with what each one showed."""
    user = bench_viewer(stored)
    trace = wide_trace(stored)
    evaluation, evaluation_s = bench_evaluation(stored)
    client = Client()
    client.force_login(user)
    pages = {
        "trace": time_page(client, reverse("trace-detail", args=[trace.pk]), runs),
        "evaluation": time_page(client, reverse("evaluation-detail", args=[evaluation.pk]), runs),
        "audit_log": time_page(client, reverse("audit-log"), runs),
        "trace_history": time_page(client, reverse("trace-list"), runs),
    }
    pages["trace"]["candidates"] = trace.candidates.count()
    pages["evaluation"]["runs"] = evaluation.runs.count()
    pages["evaluation"]["run_s"] = None if evaluation_s is None else round(evaluation_s, 2)
    pages["audit_log"]["entries"] = AuditEntry.objects.count()
    pages["trace_history"]["traces"] = Trace.objects.count()
    return pages

