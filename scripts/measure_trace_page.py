"""Time the trace page for a 200-candidate trace: median and p95 over several renders.

    .venv/bin/python scripts/measure_trace_page.py [--runs 15] [--candidates 200]

Builds its own throwaway test database (FG_TEST_DATABASE_NAME, default test_fg_measure_trace),
imports a synthetic corpus through corpus_import (with hash vectors instead of the embedding
model: this measures rendering, not embedding), selects once through services.selection_run with
EngineConfig(pool_size=N),
stores the trace through services.trace_write and renders /traces/<pk>/ with Django's test client.
Not a timed test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("FG_TEST_DATABASE_NAME", "test_fg_measure_trace")
os.environ.setdefault("FG_QUIET_EMBEDDED", "1")

CLASSES = ("rule", "result", "note", "design", "prose")
WORDS = (
    "budget ranking review evidence context memory frame retrieval recall precision token "
    "bundle trace signal stage policy corpus project baseline measure class pull window"
).split()


def corpus_files(directory: Path, units: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.yaml").write_text(
        "name: measure\nstandpoint: 2026-09-20T12:00:00Z\nprojects:\n"
        "  - slug: measure\n    name: Measure\n    frame:\n      scope: [measure]\n"
        "      default_classes: [rule, result]\n      class_pull: 3\n"
        "      work_types:\n        review: [rule, result, note, design]\n"
        "  - slug: neighbour\n    name: Neighbour\n    frame:\n      scope: [neighbour]\n",
        encoding="utf-8",
    )
    rows = []
    for i in range(units):
        words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(4)]
        words += [f"w{(i * 131 + k * 17) % 997}" for k in range(8 + i % 30)]
        rows.append(
            {
                "id": f"u{i:04d}",
                "project": "neighbour" if i % 9 == 0 else "measure",
                "class": CLASSES[i % len(CLASSES)],
                "title": f"Unit {i}",
                "text": "budget " + " ".join(words) + f" number {i}.",
                "created_at": f"2026-0{1 + i % 9}-1{i % 10}T10:00:00Z",
                **({"echo_of": f"u{i - 5:04d}"} if i % 23 == 5 and i >= 5 else {}),
            }
        )
    (directory / "units.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ledger = "\n".join(f"      u{i:04d}: MUST" for i in range(1, 60, 12))
    (directory / "tasks.yaml").write_text(
        "tasks:\n  - id: t-measure\n    project: measure\n"
        "    query: What does the budget rule say about ranking review evidence?\n"
        "    standpoint: 2026-09-20T12:00:00Z\n    budget_tokens: 1500\n"
        "    signals:\n      - {id: s1, kind: user_message, content: Review the budget rule.}\n"
        "    frame:\n      objective: Review the budget rule.\n      work_type: review\n"
        "      cites: {objective: [s1], work_type: [s1]}\n"
        f"    ledger:\n{ledger}\n",
        encoding="utf-8",
    )
    return directory


def hash_vectors(texts, batch_size=64, progress=None):
    import numpy as np

    out = np.stack(
        [
            np.frombuffer(hashlib.sha512(t.encode()).digest() * 12, dtype=np.uint8)[:384].astype(np.float32) - 127.5
            for t in texts
        ]
    )
    if progress is not None:
        progress(len(texts))
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one full render")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_test_environment

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        measure(args.runs, args.candidates, args.profile)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def measure(runs: int, size: int, profile: bool = False) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from selection.engine.types import EngineConfig
    from selection.memory import embeddings, store
    from selection.memory.importing import corpus_import
    from selection.models import Project, Task
    from selection.serving import selections as services

    embeddings.embed_texts = hash_vectors
    with tempfile.TemporaryDirectory() as tmp:
        corpus = corpus_import(corpus_files(Path(tmp) / "measure", size + 40))
    project = Project.objects.get(slug="measure")
    task = Task.objects.get(corpus=corpus, uid="t-measure")
    number, frame = services.frame_for(project)
    work = store.work_frame_for_task(task)
    inputs = services.SelectionInputs(
        project_frame=frame, work_frame=work, query=task.query, budget_tokens=task.budget_tokens, condition="C6"
    )
    config = EngineConfig(pool_size=size, lexical_k=size + 40, dense_k=size + 40)
    result = services.selection_run(inputs, store.corpus_index(corpus.pk), config=config)
    trace = services.trace_write(result, project=project, frame_version=number, task=task, source="select")
    candidates = trace.candidates.count()

    user = get_user_model().objects.create_superuser("measure", password=None)
    client = Client()
    client.force_login(user)
    url = reverse("trace-detail", args=[trace.pk])
    timings = {}
    for label, params, headers in (
        ("full page", {}, {}),
        (
            "htmx table (sorted, filtered)",
            {"sort": "-goal_relevance", "disposition": "not-admitted"},
            {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "candidates"},
        ),
    ):
        response = client.get(url, params, **headers)  # warm-up: templates, first queries
        assert response.status_code == 200, response.status_code
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            response = client.get(url, params, **headers)
            samples.append(time.perf_counter() - start)
        timings[label] = (samples, len(response.content))

    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(client.get, url)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    print(f"trace #{trace.pk}: {candidates} candidates, {len(result.bundle.items)} bundle items, condition C6")
    for label, (samples, size_bytes) in timings.items():
        samples.sort()
        p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
        print(
            f"{label:32s} runs {len(samples):3d}  median {statistics.median(samples) * 1000:7.1f} ms  "
            f"p95 {p95 * 1000:7.1f} ms  max {samples[-1] * 1000:7.1f} ms  ({size_bytes / 1024:.0f} KiB)"
        )


if __name__ == "__main__":
    main()
