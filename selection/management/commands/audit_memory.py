"""`python manage.py audit_memory DIR --conflicts`: the peer's structural conflict audit
(`memory-custodian check --conflicts`) of DIR/docs/memory: `Conflict status: CLEAR / REVIEW /
CONFLICT / INVALID` and one line per MC-CONFLICT finding; exits 1 on CONFLICT or INVALID."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from selection.corpus import CorpusError
from selection.corpus.custodian.conflicts import analyze_conflicts
from selection.corpus.memory_markdown import read_memory


class Command(BaseCommand):
    help = "Audit DIR/docs/memory as MemoryCustodian does (check --conflicts)."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="the repository (or any directory) holding docs/memory")
        parser.add_argument("--conflicts", action="store_true", required=True, help="the structural conflict audit")
        parser.add_argument("--area", action="append", default=[], help="a matched area (MC-CONFLICT-009)")

    def handle(self, *args, **o):
        try:
            read = read_memory(o["directory"], project="audit", strict=False)
        except CorpusError as error:
            self.stdout.write("Conflict status: INVALID")
            for issue in error.issues:
                self.stdout.write(f"- {issue}")
            raise CommandError("the manifest is INVALID", returncode=1) from None
        result = analyze_conflicts(read, matched_areas=tuple(o["area"]))
        for line in result.lines():
            self.stdout.write(line)
        if result.exit_code:
            raise CommandError(f"conflict status {result.status.value}", returncode=result.exit_code)
