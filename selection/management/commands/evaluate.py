"""`python manage.py evaluate NAME`: run the condition ladder on a corpus, store it, print it.
`evaluate --all`: the same for every loaded corpus with tasks, then C6 and the oracle side by side
with each corpus's split (dev, test, outside: selection/corpus/splits.py)."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from selection.corpus.splits import DEV, OUTSIDE, TEST, corpus_split, shipped_corpora
from selection.engine.attribution import LOSS_STAGES
from selection.evaluation.aggregation import ECODES
from selection.evaluation.ladder import EvaluationError, evaluation_run
from selection.models import Corpus

SHORT = {
    "must_include_recall": "recall",
    "precision": "precision",
    "leakage": "leakage",
    "harmful_admission": "harmful",
    "redundancy": "redundancy",
    "tokens": "tokens",
}
SPLIT_ORDER = (DEV, TEST, OUTSIDE)


def fmt(metric: str, value: float) -> str:
    return f"{value:.1f}" if metric == "tokens" else f"{value:.3f}"


class Command(BaseCommand):
    help = (
        "Evaluate a corpus: every task under each condition (default C0..C6 and the oracle CO), "
        "scored against the hidden ledgers; prints the ladder, pair overlaps, the misassignment "
        "hazard and E-code counts, and stores the evaluation with a trace per run."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", help="corpus name (or --all)")
        parser.add_argument(
            "--all",
            action="store_true",
            help="evaluate every loaded corpus with tasks and print C6 and the oracle per corpus, with its split",
        )
        parser.add_argument("--conditions", default="", help="comma-separated, e.g. C0,C4,C6,CO")
        parser.add_argument("--json", dest="json_path", help="write the result document here (- for stdout)")
        parser.add_argument("--quiet", action="store_true", help="print only the ladder means")
        parser.add_argument(
            "--builders",
            default="",
            help="comma-separated frame builders for the frame-builder table, e.g. declared,cue,similarity[,model]",
        )

    def handle(self, *args, **o):
        if o["all"]:
            self.evaluate_all(o)
            return
        if not o["name"]:
            raise CommandError("give a corpus name, or --all for every loaded corpus")
        bar = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if bar is None:  # a bar on stderr: stdout stays the report (or the JSON)
                bar = tqdm(total=total, unit="task", desc="evaluating", file=self.stderr._out, leave=True)
            bar.update(done - bar.n)

        try:
            evaluation = evaluation_run(
                corpus=o["name"],
                conditions=o["conditions"] or None,
                builders=o["builders"] or None,
                progress=progress,
            )
        except EvaluationError as error:
            raise CommandError(str(error)) from error
        finally:
            if bar is not None:
                bar.close()
        doc = evaluation.result
        if o["json_path"] == "-":
            self.stdout.write(json.dumps(doc, indent=2))
            return
        if o["json_path"]:
            Path(o["json_path"]).write_text(json.dumps(doc, indent=2) + "\n")
        self.print_report(evaluation, doc, brief=o["quiet"])

    def evaluate_all(self, o) -> None:
        if o["name"] or o["json_path"] or o["builders"]:
            raise CommandError("--all takes no corpus name, --json or --builders; it prints the split table")
        try:
            shipped = shipped_corpora(Path(settings.BASE_DIR) / "fixtures")
        except ValueError as error:
            raise CommandError(str(error)) from error
        corpora = [corpus for corpus in Corpus.objects.order_by("name") if corpus.tasks.exists()]
        if not corpora:
            raise CommandError("no loaded corpus has tasks: run import_fixtures (or import_corpus DIR) first")
        rows = []
        for corpus in corpora:
            split = corpus_split(corpus.name, corpus.extras, shipped)
            try:
                evaluation = evaluation_run(corpus=corpus, conditions=o["conditions"] or None)
            except EvaluationError as error:
                raise CommandError(f"{corpus.name}: {error}") from error
            self.stdout.write(f"Evaluation {evaluation.pk} of {corpus.name} ({split} split)")
            rows.append((SPLIT_ORDER.index(split), corpus.name, split, evaluation.result))
        self.print_splits(sorted(rows))

    def print_splits(self, rows) -> None:
        out = self.stdout.write
        out("\nC6 and the oracle per corpus (means over tasks); engine defaults are chosen on dev only")
        heads = ["split", "tasks", "C6 recall", "C6 prec.", "C6 tokens", "CO tokens"]
        out(self._row("corpus", heads, first=16))
        for _, name, split, doc in rows:
            c6, co = doc["conditions"].get("C6"), doc["conditions"].get("CO")
            values = [
                split,
                str(len(doc["task_info"])),
                fmt("must_include_recall", c6["mean"]["must_include_recall"]) if c6 else "-",
                fmt("precision", c6["mean"]["precision"]) if c6 else "-",
                fmt("tokens", c6["mean"]["tokens"]) if c6 else "-",
                fmt("tokens", co["mean"]["tokens"]) if co else "-",
            ]
            out(self._row(name, values, first=16))

    def print_report(self, evaluation, doc, *, brief: bool) -> None:
        out = self.stdout.write
        names, metrics = doc["condition_order"], doc["metrics"]
        tasks = list(doc["task_info"])
        out(
            f"Evaluation {evaluation.pk} of {doc['corpus']}: {len(tasks)} tasks, "
            f"{doc['engine_version']}, embeddings {doc['embedding_model'] or 'none'}"
        )
        out("\nLadder (means over tasks)")
        out(self._row("condition", [SHORT[m] for m in metrics]))
        for c in names:
            mean = doc["conditions"][c]["mean"]
            out(self._row(c, [fmt(m, mean[m]) for m in metrics]))
        if brief:
            return
        for m in metrics:
            out(f"\nPer task: {m}")
            out(self._row("task", names, first=24))
            for t in tasks:
                values = [fmt(m, doc["conditions"][c]["tasks"][t][m]) for c in names]
                out(self._row(t, values, first=24))
        out("\nPair overlap (Jaccard of admitted units)")
        if doc["pairs"]:
            out(self._row("pair", names, first=24))
            for pair, row in doc["pairs"].items():
                out(self._row(pair, [f"{row[c]:.3f}" for c in names], first=24))
        else:
            out("  no pairs in this corpus")
        out(f"\nHazard: {doc['hazard_metric']}, {doc['hazard_condition']} declared vs misassigned vs C0")
        if doc["hazard"]:
            out(self._row("task", ["wrong type", "declared", "misassigned", "C0", "worse than C0"], first=24))
            for task, h in doc["hazard"].items():
                values = [
                    h["work_type"],
                    f"{h['declared']:.3f}",
                    f"{h['misassigned']:.3f}",
                    f"{h['C0']:.3f}",
                    "yes" if h["worse_than_C0"] else "no",
                ]
                out(self._row(task, values, first=24, width=14))
        else:
            out("  none (needs C0 and C6, and a task with misassigned_work_type)")
        out("\nE-codes (units attributed, summed over tasks)")
        out(self._row("condition", list(ECODES), width=6))
        for c in names:
            counts = doc["ecode_counts"][c]
            out(self._row(c, [str(counts[code]) for code in ECODES], width=6))
        out("\nRecall at every stage (share of the MUST units, summed over tasks, lost at each stage)")
        out(self._row("condition", ["MUST", *LOSS_STAGES], width=12))
        for c in names:
            losses = doc["stage_losses"][c]
            shares = [f"{losses['shares'][stage]:.3f}" for stage in LOSS_STAGES]
            out(self._row(c, [str(losses["must"]), *shares], width=12))
        out("\nPrefix stability (share of each bundle repeating the start of its project's previous one)")
        out(self._row("condition", names, width=8))
        out(self._row("share", [f"{doc['prefix_stability'][c]:.3f}" for c in names], width=8))
        if doc.get("builders"):
            self.print_builders(doc)
        out(f"\nStored as evaluation {evaluation.pk} with {evaluation.runs.count()} runs, each with its trace.")

    def print_builders(self, doc) -> None:
        out = self.stdout.write
        table, details, hazard = doc["builders"], doc["builder_details"], doc["builder_hazard"]
        c0 = doc["conditions"]["C0"]["mean"]["must_include_recall"]
        out("\nFrame builders (C6; must-include recall with and without abstention)")
        heads = ["accuracy", "declared", "confident", "ambiguous", "unknown", "abstain", "no abst."]
        out(self._row("builder", heads, first=14))
        for name, row in table.items():
            counts = details[name]["establishment_counts"]
            values = [
                f"{row['accuracy']:.3f}",
                str(counts["declared"]),
                str(counts["inferred-confident"]),
                str(counts["inferred-ambiguous"]),
                str(counts["unknown"]),
                f"{row['abstention']['mean']['must_include_recall']:.3f}",
                f"{row['no_abstention']['mean']['must_include_recall']:.3f}",
            ]
            out(self._row(name, values, first=14))
        out(self._row("C0 (no frame)", ["", "", "", "", "", f"{c0:.3f}", f"{c0:.3f}"], first=14))
        for name, row in table.items():
            out(f"\nPer task, {name} builder: work type, establishment, recall vs C0")
            heads = ["declared", "built", "establishment", "abstain", "no abst.", "C0"]
            out(self._row("task", heads, first=24, width=22))
            for task, cell in row["abstention"]["tasks"].items():
                info = details[name]["tasks"][task]
                values = [
                    info["declared_work_type"] or "-",
                    cell["work_type"] or "-",
                    cell["establishment"],
                    f"{cell['must_include_recall']:.3f}",
                    f"{row['no_abstention']['tasks'][task]['must_include_recall']:.3f}",
                    f"{info['C0']:.3f}",
                ]
                out(self._row(task, values, first=24, width=22))
        out("\nBuilder hazard: tasks a builder misread, recall declared / no abstention / abstention / C0")
        for name, rows in hazard.items():
            if not rows:
                out(f"  {name}: no misread task")
                continue
            for task, h in rows.items():
                out(
                    f"  {name:<11} {task:<24} {h['declared_work_type']} read as {h['work_type']} "
                    f"({h['establishment']}): {h['declared']:.3f} / {h['no_abstention']:.3f} / "
                    f"{h['abstention']:.3f} / {h['C0']:.3f}"
                )
        if doc.get("hazard_abstention"):
            out(
                "\nHazard with abstention: the misassigned work type established against each builder's "
                "scores; recall declared / misassigned at full strength / with abstention / C0"
            )
            for name, rows in doc["hazard_abstention"].items():
                for task, h in rows.items():
                    out(
                        f"  {name:<11} {task:<24} as {h['work_type']} ({h['establishment']}): "
                        f"{h['declared']:.3f} / {h['no_abstention']:.3f} / {h['abstention']:.3f} / {h['C0']:.3f}"
                    )

    @staticmethod
    def _row(label: str, cells, *, first: int = 12, width: int = 11) -> str:
        return f"  {label:<{first}}" + "".join(f"{cell:>{width}}" for cell in cells)
