"""Import is a bulk write: a corpus imported whole and the same corpus imported without its last
units, those then written one by one, give the same units, the same bundles and the same traces'
candidates. Both go through the same row writers and the same sequence appender."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from django.db import transaction

CONTEXT_LAB = Path(__file__).resolve().parents[3] / "fixtures" / "context-lab"
WRITTEN = 4  # the last units of units.jsonl that nothing else names


class _Rollback(Exception):
    pass


@pytest.fixture
def per_text_vectors(monkeypatch):
    """The real model's vector of each text, computed once: a batch and a single text embed alike."""
    from selection.memory import embeddings

    real, cache = embeddings.embed_texts, {}

    def cached(texts, batch_size=64, progress=None):
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            cache.update(zip(missing, real(missing, batch_size=batch_size), strict=True))
        if progress is not None:
            progress(len(texts))
        return np.stack([cache[t] for t in texts]) if texts else real(texts)

    monkeypatch.setattr(embeddings, "embed_texts", cached)


def _split(tmp_path: Path) -> tuple[Path, list[dict]]:
    """context-lab without its last WRITTEN units that no other line or task names."""
    lines = (CONTEXT_LAB / "units.jsonl").read_text().splitlines()
    others = (CONTEXT_LAB / "tasks.yaml").read_text() + (CONTEXT_LAB / "proposals.yaml").read_text()
    records = [json.loads(line) for line in lines if line.strip()]
    free = [
        r for r in records
        if r["id"] not in others and not any(r["id"] in line for line in lines if json.loads(line)["id"] != r["id"])
    ]  # fmt: skip
    tail = [r for r in records if r in free[-WRITTEN:]]
    assert tail and records[-len(tail) :] == tail or len(tail) == WRITTEN
    directory = tmp_path / "context-lab"
    shutil.copytree(CONTEXT_LAB, directory)
    kept = [line for line, r in zip(lines, records, strict=True) if r not in tail]
    (directory / "units.jsonl").write_text("\n".join(kept) + "\n")
    return directory, tail


def _observe():
    """Bundles and candidates of every context-lab task, selected live; the corpus's units."""
    from selection.memory import store
    from selection.models import Corpus, Task
    from selection.serving.serve import select_in_project

    corpus = Corpus.objects.get(name="context-lab")
    units, _ = store.load_units(corpus.pk)
    seen = {"units": sorted((u.id, u.project, u.text, u.supersedes, u.valid_to) for u in units), "tasks": {}}
    for task in Task.objects.filter(corpus=corpus).select_related("project").order_by("uid"):
        result = select_in_project(
            project=task.project, query=task.query, budget_tokens=task.budget_tokens, standpoint=task.standpoint
        ).result
        seen["tasks"][task.uid] = (
            result.bundle.digest,
            [(c.unit_id, c.disposition, c.reason_code) for c in result.trace.candidates],
        )
    return seen


@pytest.mark.django_db
def test_an_imported_corpus_and_one_written_unit_by_unit_select_alike(tmp_path, per_text_vectors, django_user_model):
    from authority.models import RoleGrant
    from selection.memory.importing import corpus_import
    from selection.memory.writes.services import unit_create
    from selection.models import MemoryUnit, Project

    partial, tail = _split(tmp_path)
    observed = {}
    for way in ("imported", "written"):
        try:
            with transaction.atomic():
                if way == "imported":
                    corpus_import(CONTEXT_LAB)
                else:
                    corpus_import(partial)
                    lead = django_user_model.objects.create_user(f"lead-{way}")
                    for project in Project.objects.filter(corpus__name="context-lab"):
                        RoleGrant.objects.create(user=lead, project=project, role="lead")
                    for record in tail:
                        project = Project.objects.get(slug=record["project"])
                        fields = {k: v for k, v in record.items() if k != "project"}
                        unit_create(actor=lead, project=project, fields=fields, via="command")
                    assert MemoryUnit.objects.filter(uid__in=[r["id"] for r in tail], status="active").count() == len(
                        tail
                    )
                observed[way] = _observe()
                raise _Rollback
        except _Rollback:
            pass
    assert observed["written"]["units"] == observed["imported"]["units"]
    assert observed["written"]["tasks"] == observed["imported"]["tasks"]
    candidates = {c[0] for _, listed in observed["written"]["tasks"].values() for c in listed}
    assert candidates & {r["id"] for r in tail}, "no task retrieves a written unit: the comparison proves little"
