"""Import rate: corpus_import of a generated corpus with real model embeddings, rolled back after."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace

from django.db import transaction

from bench.generator import generate
from selection.corpus.contents import CorpusData, ProjectSpec, UnitRecord
from selection.corpus.writer import write_corpus
from selection.memory import embeddings
from selection.memory.importing import EMBED_BATCH, corpus_import


class _Rollback(Exception):
    """Raised inside the import's transaction so that nothing it wrote stays."""


def time_import(bench_size: int, seed: int, units: int) -> dict:
    """Units per second through corpus_import, and the seconds spent embedding before the writes;
    beside it the model alone on the same texts, measured before and after the import."""
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
    embedder = embeddings.get_embedder()
    embeddings.embed_texts(texts[:EMBED_BATCH], batch_size=EMBED_BATCH)  # the model loaded and warm

    def raw() -> float:
        """The model alone on the same texts in the import's own batches: the ceiling an import
        can approach."""
        begun = time.perf_counter()
        embeddings.embed_texts(texts, batch_size=EMBED_BATCH)
        return time.perf_counter() - begun

    # the model alone before and after the import, both warm: a machine that gets busier or
    # quieter during the run moves both sides of the ratio alike
    raw_before = raw()
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
    raw_after = raw()
    raw_s = (raw_before + raw_after) / 2
    total = marks["end"] - marks["start"]
    embed_s = phases.get("writing_first", marks["end"]) - marks["start"]
    return {
        "units": units,
        "seconds": round(total, 2),
        "units_per_s": round(units / total, 1),
        "embedding_s": round(embed_s, 2),
        "raw_encode_units_per_s": round(units / raw_s, 1),
        "raw_encode_units_per_s_before_after": [
            round(units / raw_before, 1), round(units / raw_after, 1)
        ],
        "ratio_to_raw_encode": round(raw_s / total, 3),
        "embedding": f"{embedder.name} on {embedder.runtime}",
        "runtime": embedder.runtime,
    }
