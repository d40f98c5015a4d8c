"""`python manage.py bench --sizes 10000,100000,1000000 [--json PATH]`: the performance benchmark."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from bench.runner import BenchOptions, run


def _sizes(value: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in value.split(",") if part.strip())
    except ValueError as error:
        raise CommandError(f"--sizes: {value!r} is not a comma-separated list of integers") from error
    if not sizes or min(sizes) < 50:
        raise CommandError("--sizes: every size must be at least 50 units")
    return sizes


class Command(BaseCommand):
    help = (
        "Time selection (C0, C4, C6), the rank_bm25 reference, the service end to end, backtest "
        "replays, import, the main pages, scope in a 100-project store and the prefix consecutive "
        "selections share over generated corpora; print the figures and optionally write JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("--sizes", default="10000", help="comma-separated unit counts")
        parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--tasks", type=int, default=64, help="synthetic tasks per corpus")
        parser.add_argument("--samples", type=int, default=256, help="selections timed per condition")
        parser.add_argument("--reference-queries", type=int, default=24)
        parser.add_argument("--naive-reference-max", type=int, default=100_000,
                            help="skip the naive rank_bm25 reference above this size (it holds "
                                 "several GB at 1M); the strong reference runs at every size")
        parser.add_argument("--e2e-runs", type=int, default=40)
        parser.add_argument("--workers", default="1,2", help="backtest worker process counts")
        parser.add_argument("--import-units", type=int, default=10_000,
                            help="units imported (with real embeddings) to time import, once per run")
        parser.add_argument("--page-runs", type=int, default=20,
                            help="timed requests per page (trace, evaluation, audit log, trace "
                                 "history); 0 skips the pages; needs the database parts")
        parser.add_argument("--db-max-size", type=int, default=100_000,
                            help="skip the database parts above this size")
        parser.add_argument("--scoped-per-project", type=int, default=200,
                            help="units a project in the 100-project scoped store (0 skips it)")
        parser.add_argument("--scoped-tasks", type=int, default=32,
                            help="tasks of the measured project in the scoped store")
        parser.add_argument("--prefix-sequences", type=int, default=16,
                            help="task sequences selected step by step to measure the prefix "
                                 "consecutive bundles share (0 skips it)")
        parser.add_argument("--prefix-steps", type=int, default=8,
                            help="selections in each task sequence (at least 2)")
        parser.add_argument("--prefix-units", type=int, default=10_000,
                            help="units of the corpus the task sequences are selected on")
        parser.add_argument("--live-writes", type=int, default=100,
                            help="units the live part writes with embeddings (0: part skipped)")
        parser.add_argument("--no-db", action="store_true", help="engine and reference only")
        parser.add_argument("--no-cold-start", action="store_true",
                            help="skip the cold-start part (fresh `select` processes and a fresh server)")
        parser.add_argument("--blas-threads", type=int, default=1,
                            help="BLAS threads for the run (0: the library default)")
        parser.add_argument("--exact-dense", action="store_true",
                            help="exact dense search at every size (no IVF)")
        parser.add_argument("--ivf-from", type=int,
                            help="use the IVF searcher from this many units (default 50000)")

    def handle(self, *args, **opts):
        if 0 < opts["scoped_per_project"] < 40:
            raise CommandError("--scoped-per-project: 0 (skip) or at least 40 units a project")
        if opts["prefix_sequences"] < 0:
            raise CommandError("--prefix-sequences: 0 (skip) or more task sequences")
        if opts["prefix_sequences"] and opts["prefix_steps"] < 2:
            raise CommandError("--prefix-steps: at least 2 selections a sequence (one consecutive pair)")
        if opts["prefix_sequences"] and opts["prefix_units"] < 50:
            raise CommandError("--prefix-units: at least 50 units")
        options = BenchOptions(
            sizes=_sizes(opts["sizes"]),
            seed=opts["seed"],
            tasks=opts["tasks"],
            samples=opts["samples"],
            reference_queries=opts["reference_queries"],
            naive_reference_max=opts["naive_reference_max"],
            e2e_runs=opts["e2e_runs"],
            workers=tuple(int(w) for w in opts["workers"].split(",") if w.strip()),
            import_units=opts["import_units"],
            page_runs=opts["page_runs"],
            db_max_size=opts["db_max_size"],
            database=not opts["no_db"],
            blas_threads=opts["blas_threads"] or None,
            scoped_per_project=opts["scoped_per_project"],
            scoped_tasks=opts["scoped_tasks"],
            prefix_sequences=opts["prefix_sequences"],
            prefix_steps=opts["prefix_steps"],
            prefix_units=opts["prefix_units"],
            live_writes=opts["live_writes"],
            cold_start=not opts["no_cold_start"],
            **({"dense_threshold": opts["ivf_from"]} if opts["ivf_from"] else {}),
            **({"dense_threshold": None} if opts["exact_dense"] else {}),
        )
        doc = run(options, say=lambda line: self.stdout.write(line))
        if opts["json_path"]:
            path = Path(opts["json_path"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=2) + "\n")
            self.stdout.write(f"wrote {path}")
