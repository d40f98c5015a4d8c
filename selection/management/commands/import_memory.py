"""`python manage.py import_memory DIR --corpus NAME --project SLUG`: repo-native markdown memory
(the MemoryCustodian layout under DIR/docs/memory) as a corpus; again: a new version, with a diff."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from selection.corpus import CorpusError
from selection.management.commands.import_corpus import write_conflict_warnings
from selection.memory.markdown_import import memory_import


class Command(BaseCommand):
    help = "Import DIR/docs/memory (manifest.md and its modules) as a corpus with one project."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="the repository (or any directory) holding docs/memory")
        parser.add_argument("--corpus", required=True, help="corpus name (the lineage of versions)")
        parser.add_argument("--project", required=True, help="project slug")

    def handle(self, *args, **o):
        try:
            result = memory_import(o["directory"], corpus=o["corpus"], project=o["project"])
        except CorpusError as error:
            self.stderr.write(f"{o['directory']}: {error.summary}")
            for issue in error.issues:
                self.stderr.write(f"  {issue}")
            raise CommandError(f"nothing was imported from {o['directory']}") from None
        units = result.corpus.units.count()
        self.stdout.write(
            self.style.SUCCESS(
                f"imported {result.corpus.name} (memory version {result.version}): project "
                f"{o['project']}, {units} units"
            )
        )
        if result.version > 1:
            self.stdout.write(
                f"diff against version {result.version - 1}: +{len(result.added)} added, "
                f"-{len(result.removed)} removed, ~{len(result.changed)} changed"
            )
            for label, ids in (("+", result.added), ("-", result.removed), ("~", result.changed)):
                for uid in ids:
                    self.stdout.write(f"  {label} {uid}")
            for path in result.frame_changes:
                self.stdout.write(f"  frame: {path} changed (a new frame version is promoted)")
        for name in result.missing_modules:
            self.stderr.write(f"warning: module {name} is enabled in the manifest but absent on disk")
        write_conflict_warnings(self.stderr, result.conflicts)
