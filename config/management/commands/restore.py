"""restore DIR: a backup into an empty database, checked against its manifest and the trace chains."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from config.backup import BackupError, backup_restore


class Command(BaseCommand):
    help = "Restore the backup in DIR into an empty database; refuses a database that holds tables."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="a directory written by `manage.py backup`")

    def handle(self, *args, directory, **options):
        try:
            restored = backup_restore(directory)
        except BackupError as error:
            raise CommandError(str(error)) from error
        if not restored.chains_intact:
            raise CommandError("restored, but a trace chain is broken: run verify_traces to see where")
        counts = restored.counts
        self.stdout.write(
            f"restored {restored.tables} tables: {counts['selection_memoryunit']} units, {restored.traces} traces "
            f"(every chain intact), {counts['authority_auditentry']} audit rows; rows and chain heads "
            "match the backup's manifest"
        )
        before, after = restored.fingerprints
        for corpus, fingerprint in sorted(after.items()):
            was = before.get(corpus, "-")
            self.stdout.write(f"  corpus {corpus}: index fingerprint {was} -> {fingerprint} (rebuilt from the rows)")
