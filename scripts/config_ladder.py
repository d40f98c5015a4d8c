"""The ladder of imported corpora with the engine's defaults, or every frame's stop rule, replaced
for this process, in process and without writing traces: the same replays (`replay_task`,
persist=False) and scoring (`score_result`) as `manage.py evaluate`, so its means equal
evaluate's for the same defaults. For measuring a default before changing it (docs/results.md,
"Measuring a default").

    FG_QUIET_EMBEDDED=1 PYTHONPATH=$PWD .venv/bin/python scripts/config_ladder.py \\
        context-lab,book-ch10 C4,C5,C6 '{"scope_at_retrieval": true}' \\
        [--admission '{"rule": "relative", "floor": 0.6}' ...] [--explain] [--json OUT]

Prints recall / precision / tokens per corpus and condition (and, with C6, the misassigned-work-type
hazard, the C6 tasks below recall 1 and C5's worst harmful admission). `--admission` (repeatable)
replaces every frame's stop rule by a policy, `none` removes it, `frame` keeps each frame's own
(the default); `--explain` lists each C6 task's candidates that reached the budget, with label,
bucket, how each came in and its stop note; --json writes every task's metrics, its lost MUST units
and their loss stages.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from statistics import mean

METRICS = ("must_include_recall", "precision", "tokens")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpora", help="comma-separated corpus names (imported)")
    parser.add_argument("conditions", nargs="?", default="C2,C3,C4,C5,C6")
    parser.add_argument("overrides", nargs="?", default="{}", help="EngineConfig fields, as JSON")
    parser.add_argument("--admission", action="append", help="JSON policy, frame or none; repeatable")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--json", dest="out")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from selection.engine.types import AdmissionPolicy, EngineConfig
    from selection.serving import selections as services

    overrides = json.loads(args.overrides)
    if overrides:
        # every selection of this process runs with these defaults (run_selection builds its own
        # EngineConfig); nothing else changes
        services.EngineConfig = lambda **kw: EngineConfig(**{**overrides, **kw})
    frame_for = services.frame_for
    doc = {}
    for admission in args.admission or ["frame"]:
        if admission != "frame":
            policy = None if admission == "none" else AdmissionPolicy(**json.loads(admission))

            def with_policy(project, frame_version=None, policy=policy):
                number, frame = frame_for(project, frame_version)
                return number, replace(frame, admission=policy)

            services.frame_for = with_policy
        print(f"== admission {admission}", flush=True)
        for corpus in args.corpora.split(","):
            ran = ladder(services, corpus, args.conditions.split(","), args.explain)
            if ran is None:
                print(f"corpus {corpus!r} has no tasks (imported?)", file=sys.stderr)
                return 2
            doc.setdefault(admission, {}).update(ran)
        services.frame_for = frame_for
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(doc, handle, indent=1, default=str)
    return 0


def ladder(services, corpus: str, conditions: list[str], explain: bool) -> dict | None:
    from selection.evaluation.scoring import ledger_for_task, score_result
    from selection.models import Task

    tasks = list(
        Task.objects.filter(corpus__name=corpus).select_related("project", "corpus").order_by("position", "uid")
    )
    if not tasks:
        return None
    plan = [(condition, None) for condition in conditions]
    if "C6" in conditions:
        plan.append(("C6", "misassigned"))
    runs: dict[str, dict] = {}
    for condition, wrong in plan:
        key = condition if wrong is None else "C6-misassigned"
        for task in tasks:
            if wrong and not task.misassigned_work_type:
                continue
            work_type = task.misassigned_work_type if wrong else None
            selection = services.replay_task(task=task, condition=condition, work_type=work_type, persist=False)
            ledger = ledger_for_task(task)
            score = score_result(task, selection.result, selection.project_frame, ledger)
            admitted = set(score.admitted)
            lost = sorted(u for u, label in ledger.items() if label == "MUST" and u not in admitted)
            runs.setdefault(key, {})[task.uid] = dict(
                score.metrics, lost=lost, losses=score.losses() if lost else None
            )
            if explain and key == "C6":
                print(f"  {task.uid}")
                for row in describe(selection.result, ledger):
                    print(f"    {row}")
        if key in runs and key != "C6-misassigned":
            means = {m: mean(r[m] for r in runs[key].values()) for m in METRICS}
            print(
                f"{corpus:12s} {condition} recall {means['must_include_recall']:.3f} "
                f"precision {means['precision']:.3f} tokens {means['tokens']:.1f}",
                flush=True,
            )
    c6 = runs.get("C6", {})
    if c6:
        hazard = [
            (uid, round(c6[uid]["must_include_recall"], 3), round(r["must_include_recall"], 3))
            for uid, r in runs.get("C6-misassigned", {}).items()
        ]
        print(f"  hazard C6 declared/misassigned: {hazard}  not below: {[h for h in hazard if h[2] >= h[1] > 0]}")
        lost = {u: round(m["must_include_recall"], 3) for u, m in c6.items() if m["must_include_recall"] < 1}
        print(f"  C6 tasks below recall 1: {lost}")
        if "C5" in runs:
            print(f"  C5 harmful max {max(m['harmful_admission'] for m in runs['C5'].values()):.3f}")
    return {
        f"{corpus}:{key}": {"mean": {m: mean(r[m] for r in rows.values()) for m in METRICS}, "tasks": rows}
        for key, rows in runs.items()
    }


def describe(result, ledger) -> list[str]:
    """Every C6 candidate that reached the budget stage, in rank order: label, disposition, bucket,
    how it came in (retrieval sources), its evidence figures, its reason and stop note."""
    rows = []
    for c in sorted(result.trace.candidates, key=lambda c: (c.rank is None, c.rank or 0)):
        if c.stage not in ("budget", "coalescing", "routing") and c.disposition != "admitted":
            continue
        s, r = c.signals, c.retrieval
        rows.append(
            f"{c.disposition[:5]:5} {ledger.get(c.unit_id, '-')[:4]:4} b{c.bucket} r{c.rank} {c.unit_id:30} "
            f"{c.evidence_class[:16]:16} q{s.query_relevance:.2f} o{s.objective_relevance:.2f} "
            f"qs{r.query_score:.2f} d{(r.dense_score or 0):.2f}/{(r.objective_dense_score or 0):.2f} "
            f"t{c.unit_tokens} {'+'.join(r.sources)} {c.reason_code} {c.stop_note or ''}"[:260]
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
