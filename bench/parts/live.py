"""Live memory: writes while selections run, on a copy of the generated corpus (bench-live-<size>).

- sustained write rate with embeddings: one unit a write, its text embedded by the model, its row
  and its memory change committed (units/s), beside the model alone encoding the same texts one
  at a time (the ceiling a write can approach);
- write -> visible across two processes: this process commits a unit, a second process (a
  follower: `python -m bench.parts.live_follower`) runs C6 selections back to back and reports
  the first whose index holds the unit; the latency is the follower's clock at that selection's
  end minus this process's clock at the commit (one machine, one clock);
- C6 selection p95 here while the follower writes a stream of units, over the same p95 quiet;
- the delta merge: writing the assembled index as the new base, timed;
- rebuild-equivalence: every task's C6 selection over base + delta against one over an index
  rebuilt from the rows at the same sequence (now, and as of the sequence before the writes):
  bundle digests and whole traces compared, on every run.

Writes go straight to the rows and the memory sequence (selection.memory.changes) as a write
service does.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
from django.db import connection, transaction

from bench.generator import SyntheticCorpus, generate
from bench.held import Ask, held, serve, task_asks
from bench.stats import check, part_main, summary
from selection.engine.types import estimate_tokens
from selection.memory import embeddings, index_cache, live_index, store
from selection.memory.changes import memory_changes_append
from selection.memory.generated import GeneratedCorpus, generated_corpus_write
from selection.models import Corpus, MemoryChangeKind, MemoryUnit, Project

ROOT = Path(__file__).resolve().parents[2]
VISIBLE_P95_MAX_MS = 1000.0
UNDER_WRITES_RATIO_MAX = 1.2


def _name(slug: str) -> str:
    return slug.replace("bench-", "bench-live-", 1)


def live_corpus(bench: SyntheticCorpus) -> Corpus:
    """The live copy of the generated corpus (its projects renamed), written once and kept."""
    name = _name(bench.name)
    found = Corpus.objects.filter(name=name).first()
    if found is not None:
        return found
    with transaction.atomic():
        corpus, _ = generated_corpus_write(
            GeneratedCorpus(
                name=name, description=f"Live copy of {bench.name}", standpoint=bench.standpoint,
                embedding_model="synthetic-clustered", extras={"bench-live": bench.size},
                frames={_name(s): {**bench.snapshots[s], "scope": [_name(s)]} for s in bench.slugs},
                units=[replace(u, project=_name(u.project)) for u in bench.units],
                vectors=bench.vectors, tasks=[],
            )
        )  # fmt: skip
    return corpus


def unit_write(project: Project, uid: str, text: str, vector) -> int:
    """One unit and its memory change in one transaction; returns the sequence it was given."""
    with transaction.atomic():
        position = MemoryUnit.objects.filter(corpus_id=project.corpus_id).count() + 1
        unit = MemoryUnit.objects.create(
            corpus_id=project.corpus_id, project=project, uid=uid, position=position, evidence_class="decision",
            text=text, tokens=estimate_tokens(text), embedding=list(map(float, vector)),
        )  # fmt: skip
        return memory_changes_append(project.corpus_id, [(unit.pk, MemoryChangeKind.CREATED)], via="bench")[0]


def live_asks(bench: SyntheticCorpus) -> list[Ask]:
    """The generator's C6 tasks, asked of the live copy's projects."""
    return [replace(ask, project=_name(ask.project)) for ask in task_asks(bench.tasks, "C6")]


def live_frames(bench: SyntheticCorpus) -> dict:
    return {_name(s): replace(bench.frames[s], project=_name(s), scope=(_name(s),)) for s in bench.slugs}


def _digests(result) -> tuple[str, str]:
    text = json.dumps(result.trace.as_dict(), sort_keys=True, default=str)
    return result.bundle.digest, hashlib.sha256(text.encode()).hexdigest()


def equivalence(corpus_id: int, bench: SyntheticCorpus, *, as_of: int | None = None) -> dict:
    """Every task's C6 selection over base + delta against one over a rebuild at the same sequence."""
    live = store.corpus_index(corpus_id, as_of=as_of)
    rebuilt = live_index.rebuilt_index(corpus_id, as_of=live.memory_sequence)
    asks, frames = live_asks(bench), live_frames(bench)
    over_live, over_rebuilt = held(frames, live, asks), held(frames, rebuilt, asks)
    same = sum(_digests(serve(over_live, ask)) == _digests(serve(over_rebuilt, ask)) for ask in asks)
    return {"sequence": live.memory_sequence, "tasks": len(asks), "identical": same,
            "index_digest_equal": live.digest == rebuilt.digest}  # fmt: skip


def _timed_selections(corpus_id: int, bench: SyntheticCorpus, samples: int) -> list[float]:
    """C6 selections through the serving function, each over the corpus's index as a serving process
    asks for it (the sequence read, the delta applied when it moved)."""
    asks, frames = live_asks(bench), live_frames(bench)
    corpus = held(frames, store.corpus_index(corpus_id), asks)
    times = []
    for i in range(samples):
        begun = time.perf_counter()
        serve(replace(corpus, index=store.corpus_index(corpus_id)), asks[i % len(asks)])
        times.append((time.perf_counter() - begun) * 1000)
    return times


def _follower(corpus_id: int, project_id: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the follower reads the database this process reads (a test run's own, too)
    database = connection.settings_dict["NAME"]
    command = [sys.executable, "-m", "bench.parts.live_follower", str(corpus_id), str(project_id), database]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    if process.stdout.readline().strip() != "ready":
        raise RuntimeError("the follower process did not start")
    return process


def _ask(process: subprocess.Popen, line: str) -> str:
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return process.stdout.readline().strip()


def time_live(bench: SyntheticCorpus, *, writes: int = 100, visible: int | None = None, samples: int = 200,
              stream_rate: float = 5.0) -> dict:  # fmt: skip
    """The live figures (see the module); `visible`: writes timed to visible (None: 40, at most `writes`)."""
    visible = min(40, writes) if visible is None else visible
    corpus = live_corpus(bench)
    project = Project.objects.filter(corpus=corpus).order_by("position").first()
    run = uuid.uuid4().hex[:8]
    live_index.forget(corpus.pk)
    begun = time.perf_counter()
    store.corpus_index(corpus.pk)
    out: dict = {"corpus": corpus.name, "first_index_s": round(time.perf_counter() - begun, 2)}
    before = store.corpus_index(corpus.pk).memory_sequence
    out["equivalence_before"] = equivalence(corpus.pk, bench)

    # sustained writes with embeddings, and the model alone on the same texts one at a time
    rng = np.random.default_rng(bench.seed)
    texts = [bench.units[int(i)].text + f" live {run} {n}" for n, i in enumerate(rng.integers(0, bench.size, writes))]
    embeddings.embed_texts(texts[:1])  # the model loaded and warm
    begun = time.perf_counter()
    for text in texts:
        embeddings.embed_texts([text])
    raw = writes / (time.perf_counter() - begun)
    begun = time.perf_counter()
    for n, text in enumerate(texts):
        unit_write(project, f"live-{run}-w{n}", text, embeddings.embed_texts([text])[0])
    rate = writes / (time.perf_counter() - begun)
    out["writes"] = {"units": writes, "units_per_s": round(rate, 1), "raw_encode_units_per_s": round(raw, 1),
                     "ratio_to_raw_encode": round(rate / raw, 3)}  # fmt: skip
    begun = time.perf_counter()
    store.corpus_index(corpus.pk)  # the delta of those writes applied: base + delta assembled
    out["delta_apply_ms"] = round((time.perf_counter() - begun) * 1000, 1)

    follower = _follower(corpus.pk, project.pk)
    try:
        latencies = []
        for n in range(visible):
            vector = bench.vectors[int(rng.integers(0, bench.size))]
            uid = f"live-{run}-v{n}"
            unit_write(project, uid, f"visible {run} {n} " + bench.units[n].text, vector)
            committed = time.time()
            seen = float(_ask(follower, f"wait {uid}"))
            latencies.append((seen - committed) * 1000)
        out["write_visible"] = summary(latencies)
        store.corpus_index(corpus.pk)
        quiet = _timed_selections(corpus.pk, bench, samples)
        _ask(follower, f"stream {stream_rate} {run}")
        under = _timed_selections(corpus.pk, bench, samples)
        streamed = int(_ask(follower, "stop"))
    finally:
        follower.stdin.close()
        follower.wait(timeout=60)
    out["selection"] = {
        "quiet": summary(quiet),
        "under_writes": {**summary(under), "writes": streamed, "rate_per_s": stream_rate},
    }
    ratio = out["selection"]["under_writes"]["p95_ms"] / out["selection"]["quiet"]["p95_ms"]
    out["selection"]["p95_ratio"] = round(ratio, 3)

    index = store.corpus_index(corpus.pk)
    held = live_index.held(corpus.pk)
    begun = time.perf_counter()
    index_cache.store_base(corpus.pk, held.key, held.revision, index.memory_sequence, index)
    out["merge"] = {"s": round(time.perf_counter() - begun, 2), "delta_units": len(index) - len(held.base),
                    "sequence": index.memory_sequence}  # fmt: skip
    out["equivalence_now"] = equivalence(corpus.pk, bench)
    out["equivalence_as_of_before"] = equivalence(corpus.pk, bench, as_of=before)
    return out


def describe(out: dict) -> str:
    w, v, s = out["writes"], out["write_visible"], out["selection"]
    return (f"live ({out['corpus']}): {w['units_per_s']} writes/s with embeddings ({w['ratio_to_raw_encode']} of the "
            f"model's {w['raw_encode_units_per_s']}/s), write->visible across two processes p50 {v['p50_ms']} ms p95 "
            f"{v['p95_ms']} ms, C6 p95 {s['under_writes']['p95_ms']} ms under {s['under_writes']['writes']} writes "
            f"/ {s['quiet']['p95_ms']} ms quiet = {s['p95_ratio']}, delta of {out['merge']['delta_units']} units "
            f"applied in {out['delta_apply_ms']} ms and merged in {out['merge']['s']} s; rebuild-equivalent: "
            f"{out['equivalence_now']['identical']}/{out['equivalence_now']['tasks']} now, "
            f"{out['equivalence_as_of_before']['identical']}/{out['equivalence_as_of_before']['tasks']} as of "
            f"sequence {out['equivalence_as_of_before']['sequence']}")  # fmt: skip


def targets(out: dict, size: int) -> list[dict]:
    checks = [
        check(f"live write->visible p95 across two processes at {size}", out["write_visible"]["p95_ms"], "<=",
              VISIBLE_P95_MAX_MS, "ms"),
        check(f"live C6 p95 under writes / quiet at {size}", out["selection"]["p95_ratio"], "<=",
              UNDER_WRITES_RATIO_MAX, "x"),
    ]  # fmt: skip
    for key in ("equivalence_before", "equivalence_now", "equivalence_as_of_before"):
        e = out[key]
        identical = e["identical"] if e["index_digest_equal"] else 0
        checks.append(check(f"live {key.replace('_', ' ')} at {size}: tasks identical to a rebuild", identical,
                            ">=", e["tasks"], "tasks"))  # fmt: skip
    return checks


def _alone(size: int, writes: int) -> dict:
    out = time_live(generate(size, seed=7, tasks=64), writes=writes)
    out["units"] = size
    return out


if __name__ == "__main__":  # python -m bench.parts.live [SIZE [WRITES]]
    part_main(_alone, [10_000, 100], describe, lambda out: targets(out, out["units"]))
