"""Import rate: corpus_import of a generated corpus with real model embeddings, rolled back after."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace

from django.db import transaction

from selection import embeddings
from selection.corpus.records import CorpusData, ProjectSpec, UnitRecord
from selection.corpus.writer import write_corpus
from selection.importing import EMBED_BATCH, corpus_import

from .generator import generate


class _Rollback(Exception):
    """Raised inside the import's transaction so that nothing it wrote stays."""


def time_import(bench_size: int, seed: int, units: int) -> dict:
    """Units per second through corpus_import, and the seconds spent embedding before the writes."""
    small = generate(units, seed=seed + 1, tasks=1)
    rename = {slug: slug.replace("bench-", "bench-import-") for slug in small.slugs}
    data = CorpusData(
        name=f"bench-import-{units}",
        description="benchmark import",
        standpoint=small.standpoint,
        projects=tuple(
            ProjectSpec(
                slug=rename[slug], name=slug, frame={**small.snapshots[slug], "scope": [rename[slug]]},
                project_frame=replace(small.frames[slug], project=rename[slug], scope=(rename[slug],)),
            )
            for slug in small.slugs
        ),
        units=tuple(
            UnitRecord(unit=replace(u, project=rename[u.project]), line=i + 1)
            for i, u in enumerate(small.units)
        ),
    )
    phases: dict[str, float] = {}
    marks = {"start": 0.0}

    def progress(step: str, advanced: int, total: int) -> None:
        now = time.perf_counter()
        phases.setdefault(f"{step}_first", now)
        phases[f"{step}_last"] = now

    texts = [record.unit.text for record in data.units]
    embeddings.embed_texts(texts[:EMBED_BATCH], batch_size=EMBED_BATCH)  # the model loaded and warm
    begun = time.perf_counter()
    embeddings.embed_texts(texts, batch_size=EMBED_BATCH)
    raw_s = time.perf_counter() - begun
    with tempfile.TemporaryDirectory() as directory:
        write_corpus(data, directory)
        marks["start"] = time.perf_counter()
        try:
            with transaction.atomic():
                corpus_import(directory, progress=progress)
                marks["end"] = time.perf_counter()
                raise _Rollback
        except _Rollback:
            pass
    total = marks["end"] - marks["start"]
    embed_s = phases.get("writing_first", marks["end"]) - marks["start"]
    return {
        "units": units,
        "seconds": round(total, 2),
        "units_per_s": round(units / total, 1),
        "embedding_s": round(embed_s, 2),
        # the model alone on the same texts, same batches: the ceiling an import can approach
        "raw_encode_units_per_s": round(units / raw_s, 1),
        "ratio_to_raw_encode": round((units / total) / (units / raw_s), 3),
        "embedding": "all-MiniLM-L6-v2 (the packaged model)",
    }
