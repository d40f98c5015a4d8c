"""Replay both corpora's tasks in process with an admission policy of your choosing in every frame
(the imported frames otherwise), and print C4/C5/C6 means, the seed's C6-relevant claims, and
(with --explain) each C6 task's admitted units the ledger does not list, with why each came in.

    FG_QUIET_EMBEDDED=1 PYTHONPATH=$PWD .venv/bin/python scripts/stop_rule_sweep.py \
        --corpus context-lab --admission '{"rule": "relative", "floor": 0.6}' [--explain]

`--admission frame` keeps each frame's declared policy; `--admission none` removes it;
`--leave-one-out` also prints C6 recall/precision with each task left out. Nothing is written
(replays run with persist=False).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from statistics import mean

import django

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", action="append", required=True)
    parser.add_argument("--admission", action="append", help="JSON policy, frame or none; repeatable")
    parser.add_argument("--conditions", default="C4,C5,C6")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    django.setup()

    from selection import services
    from selection.engine.types import AdmissionPolicy
    from selection.models import Task
    from selection.scoring import ledger_for_task, score_result

    original = services.frame_for
    out = {}
    for admission in args.admission or ["frame"]:
        if admission == "frame":
            services.frame_for = original
        else:
            policy = None if admission == "none" else AdmissionPolicy(**json.loads(admission))

            def frame_for(project, frame_version=None, policy=policy):
                number, frame = original(project, frame_version)
                return number, replace(frame, admission=policy)

            services.frame_for = frame_for
        print(f"== admission {admission}")
        out[admission] = sweep(args, Task, services, ledger_for_task, score_result)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


def sweep(args, Task, services, ledger_for_task, score_result) -> dict:
    out = {}
    for name in args.corpus:
        tasks = list(
            Task.objects.filter(corpus__name=name).select_related("project", "corpus").order_by("position", "uid")
        )
        per = {}
        explain = {}
        for task in tasks:
            ledger = ledger_for_task(task)
            plan = [(c, None) for c in args.conditions.split(",")]
            if task.misassigned_work_type:
                plan.append(("C6", task.misassigned_work_type))
            for condition, wrong in plan:
                sel = services.replay_task(
                    task=task, condition=condition, work_type=wrong, source="evaluation", persist=False
                )
                score = score_result(task, sel.result, sel.project_frame, ledger)
                key = condition if wrong is None else "C6-misassigned"
                per.setdefault(key, {})[task.uid] = score.metrics
                if condition == "C6" and wrong is None and args.explain:
                    explain[task.uid] = describe(sel.result, ledger)
        means = {
            key: {
                m: round(mean(v[m] for v in runs.values()), 3) for m in ("must_include_recall", "precision", "tokens")
            }
            for key, runs in per.items()
        }
        line = "  ".join(
            f"{k} {v['must_include_recall']:.3f}/{v['precision']:.3f}/{v['tokens']:.1f}"
            for k, v in means.items()
            if k != "C6-misassigned"
        )
        print(f"{name}: {line}")
        c6 = per.get("C6", {})
        if "C6-misassigned" in per:
            hazard = [
                (uid, c6[uid]["must_include_recall"], r["must_include_recall"])
                for uid, r in per["C6-misassigned"].items()
            ]
            bad = [h for h in hazard if h[2] >= h[1] and h[1] > 0]
            print(
                f"  hazard C6 declared/misassigned: {[(u, round(a, 3), round(b, 3)) for u, a, b in hazard]}"
                f"  not below: {bad}"
            )
        if c6:
            lost = {u: round(m["must_include_recall"], 3) for u, m in c6.items() if m["must_include_recall"] < 1}
            print(f"  C6 tasks below recall 1: {lost}")
            print(f"  C5 harmful max {max(m['harmful_admission'] for m in per.get('C5', c6).values()):.3f}")
        for uid, rows in explain.items():
            print(f"  {uid}")
            for row in rows:
                print(f"    {row}")
        out[name] = {"means": means, "per_task": per}
    return out


def describe(result, ledger) -> list[str]:
    """Every C6 candidate that reached the budget stage, in rank order: label, disposition, bucket,
    how it came in (retrieval sources), its evidence figures, its reason and stop note."""
    rows = []
    for c in sorted(result.trace.candidates, key=lambda c: (c.rank is None, c.rank or 0)):
        if c.stage not in ("budget", "coalescing", "routing") and c.disposition != "admitted":
            continue
        label = ledger.get(c.unit_id, "-")
        s = c.signals
        r = c.retrieval
        rows.append(
            f"{c.disposition[:5]:5} {label[:4]:4} b{c.bucket} r{c.rank} {c.unit_id:30} {c.evidence_class[:16]:16} "
            f"q{s.query_relevance:.2f} o{s.objective_relevance:.2f} qs{r.query_score:.2f} "
            f"d{(r.dense_score or 0):.2f}/{(r.objective_dense_score or 0):.2f} t{c.unit_tokens} "
            f"{'+'.join(r.sources)} {c.reason_code} {c.stop_note or ''}"[:260]
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
