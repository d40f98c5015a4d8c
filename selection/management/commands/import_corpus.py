"""`python manage.py import_corpus DIR`: import one corpus, all or nothing, through the service."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from selection.corpus import CorpusError
from selection.memory.importing import corpus_import
from selection.memory.selectors import corpus_conflicts


class _Bars:
    """One tqdm bar per step on a terminal; nothing when the output is not one (logs, CI)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bars: dict = {}

    def __call__(self, step: str, advanced: int, total: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        if step not in self.bars:
            self.bars[step] = tqdm(total=total, desc=step, unit="item", leave=True, file=sys.stderr)
        self.bars[step].update(advanced)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


class Command(BaseCommand):
    help = "Import a corpus directory in the interchange format (corpus.yaml, units.jsonl, ...)."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="the corpus directory")
        parser.add_argument(
            "--no-progress", action="store_true", help="no progress bars, even on a terminal"
        )

    def handle(self, *args, **options):
        directory = options["directory"]
        bars = _Bars(enabled=not options["no_progress"] and sys.stderr.isatty())
        try:
            corpus = corpus_import(directory, progress=bars)
        except CorpusError as error:
            bars.close()
            # every issue, one per line, then a non-zero exit
            self.stderr.write(f"{directory}: {error.summary}")
            for issue in error.issues:
                self.stderr.write(f"  {issue}")
            raise CommandError(f"nothing was imported from {directory}") from None
        finally:
            bars.close()
        counts = (
            f"{corpus.projects.count()} projects, {corpus.units.count()} units, "
            f"{corpus.tasks.count()} tasks"
        )
        self.stdout.write(self.style.SUCCESS(f"imported {corpus.name}: {counts}"))
        write_conflict_warnings(self.stderr, corpus_conflicts(corpus_id=corpus.pk))


def write_conflict_warnings(stream, conflicts) -> None:
    """A warning listing each structural conflict; nothing is tie-broken, a person decides."""
    if not conflicts:
        return
    stream.write(
        f"warning: {len(conflicts)} structural conflict(s): active units share project, subject "
        "and facet with no supersession between them (a person must decide which governs)"
    )
    for c in conflicts:
        stream.write(f"  {c.code} {c.project} {c.subject} / {c.facet}: {', '.join(c.units)}")
