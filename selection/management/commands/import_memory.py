"""`python manage.py import_memory DIR --corpus NAME --project SLUG [--check]`: repo-native markdown
memory (the MemoryCustodian layout under DIR/docs/memory) as a corpus; again: only what changed is
applied to the same corpus. `--check` writes nothing and says what an import would do; it exits
2 when the import would be refused (the peer's INVALID), 1 when the peer's conflict audit is
CONFLICT or INVALID, 0 otherwise (a CI step)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from selection.corpus import CorpusError
from selection.management.commands.import_corpus import write_conflict_warnings
from selection.memory.markdown_import import memory_check, memory_import

REFUSED_EXIT = 2  # the peer's exit status for an INVALID manifest


class Command(BaseCommand):
    help = "Import DIR/docs/memory (manifest.md and its modules) as a corpus with one project, or check it."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="the repository (or any directory) holding docs/memory")
        parser.add_argument("--corpus", required=True, help="corpus name (the lineage of versions)")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--check", action="store_true", help="write nothing: report what an import would do")

    def handle(self, *args, **o):
        try:
            if o["check"]:
                return self._check(o)
            result = memory_import(o["directory"], corpus=o["corpus"], project=o["project"])
        except CorpusError as error:
            self._refused(o, error)
            raise CommandError(f"nothing was imported from {o['directory']}", returncode=REFUSED_EXIT) from None
        units = result.corpus.units.count()
        self.stdout.write(
            self.style.SUCCESS(
                f"imported {result.corpus.name} (memory version {result.version}): project "
                f"{o['project']}, {units} units"
            )
        )
        if result.version > 1 or result.sequences:
            self._diff(result.added, result.removed, result.changed, result.superseded)
            for path in result.frame_changes:
                self.stdout.write(f"  frame: {path} changed (a new frame version is promoted)")
            if result.sequences:
                self.stdout.write(f"  memory sequence {result.sequences.start}..{result.sequences.stop - 1}")
        self._report(result.missing_modules, result.notes, result.findings)
        write_conflict_warnings(self.stderr, result.conflicts)

    def _check(self, o) -> None:
        check = memory_check(o["directory"], corpus=o["corpus"], project=o["project"])
        read = check.read
        self.stdout.write(
            f"check: {o['directory']} reads as {len(read.units)} units "
            f"({sum(1 for u in read.units if u['x-mc'].get('unit_status') == 'candidate')} candidates), "
            f"protocol {read.protocol.get('protocol_version', 'none (routing without a Protocol)')}"
        )
        if check.differences is None:
            self.stdout.write(f"an import creates corpus {o['corpus']} with project {o['project']}")
        elif check.differences.empty:
            self.stdout.write("an import changes nothing")
        else:
            d = check.differences
            self._diff(d.added, d.removed, d.changed, d.superseded)
        missing = tuple(sorted(name for name, ids in read.frame["modules"].items() if not ids))
        self._report(missing, tuple(read.notes), check.findings)
        if check.exit_code:
            raise CommandError(f"conflict status {check.findings.status.value}", returncode=check.exit_code)

    def _refused(self, o, error: CorpusError) -> None:
        self.stderr.write(f"{o['directory']}: {error.summary} (INVALID)")
        for issue in error.issues:
            self.stderr.write(f"  {issue}")

    def _diff(self, added, removed, changed, superseded) -> None:
        self.stdout.write(f"differences: +{len(added)} added, -{len(removed)} removed, ~{len(changed)} changed")
        for label, ids in (("+", added), ("-", removed), ("~", changed)):
            for uid in ids:
                self.stdout.write(f"  {label} {uid}")
        for new, old in superseded:
            self.stdout.write(f"  {new} supersedes {old}")

    def _report(self, missing, notes, findings) -> None:
        for name in missing:
            self.stderr.write(f"warning: module {name} is enabled in the manifest but absent on disk or empty")
        for note in notes:
            self.stdout.write(f"kept: {note}")
        if findings is not None:
            for line in findings.lines():
                self.stdout.write(line)
