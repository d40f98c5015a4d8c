"""The ladder of imported corpora with the engine's defaults overridden for this process, in
process and without writing traces: the same replays (`replay_task`, persist=False) and scoring
(`score_result`) as `manage.py evaluate`, so its means equal evaluate's for the same defaults.
For measuring an EngineConfig default before flipping it (docs/results.md section 6.1b).

    FG_QUIET_EMBEDDED=1 PYTHONPATH=$PWD .venv/bin/python scripts/config_ladder.py \\
        context-lab,book-ch10 C4,C5,C6 '{"scope_at_retrieval": true}' [--json OUT]

Prints recall / precision / tokens per corpus and condition; --json writes every task's metrics,
its lost MUST units and their loss stages.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpora", help="comma-separated corpus names (imported)")
    parser.add_argument("conditions", nargs="?", default="C2,C3,C4,C5,C6")
    parser.add_argument("overrides", nargs="?", default="{}", help="EngineConfig fields, as JSON")
    parser.add_argument("--json", dest="out")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django

    django.setup()
    from authority.selectors import current_frame_version
    from selection import services
    from selection.engine.types import EngineConfig
    from selection.models import Task
    from selection.scoring import ledger_for_task, score_result

    overrides = json.loads(args.overrides)
    if overrides:
        # every selection of this process runs with these defaults (run_selection builds its own
        # EngineConfig); nothing else changes
        services.EngineConfig = lambda **kw: EngineConfig(**{**overrides, **kw})
    doc = {}
    for corpus in args.corpora.split(","):
        tasks = list(
            Task.objects.filter(corpus__name=corpus)
            .select_related("project", "corpus")
            .order_by("position", "uid")
        )
        if not tasks:
            print(f"corpus {corpus!r} has no tasks (imported?)", file=sys.stderr)
            return 2
        for condition in args.conditions.split(","):
            rows = {}
            for task in tasks:
                version = current_frame_version(project=task.project)
                selection = services.replay_task(
                    task=task, frame_version=version, condition=condition, persist=False
                )
                ledger = ledger_for_task(task)
                score = score_result(task, selection.result, selection.project_frame, ledger)
                lost = sorted(u for u, label in ledger.items() if label == "MUST" and u not in set(score.admitted))
                rows[task.uid] = dict(score.metrics, lost=lost, losses=score.losses() if lost else None)
            mean = {
                m: sum(r[m] for r in rows.values()) / len(rows)
                for m in ("must_include_recall", "precision", "tokens")
            }
            doc[f"{corpus}:{condition}"] = {"mean": mean, "tasks": rows}
            print(
                f"{corpus:12s} {condition} recall {mean['must_include_recall']:.3f} "
                f"precision {mean['precision']:.3f} tokens {mean['tokens']:.1f}",
                flush=True,
            )
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(doc, handle, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
