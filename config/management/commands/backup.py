"""backup DIR: a consistent pg_dump of the database and a manifest of what it holds (docs/trust.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from config.backup import BackupError, backup_write


class Command(BaseCommand):
    help = "Back up the database (one consistent pg_dump) and its manifest into DIR, a new directory."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="a new or empty directory")

    def handle(self, *args, directory, **options):
        try:
            manifest = backup_write(directory)
        except BackupError as error:
            raise CommandError(str(error)) from error
        counts = manifest["counts"]
        self.stdout.write(
            f"backed up {manifest['database']} into {directory}: {manifest['dump_bytes']} bytes, "
            f"{counts['selection_memoryunit']} units, {counts['selection_trace']} traces, "
            f"{counts['authority_auditentry']} audit rows, {len(manifest['index_fingerprints'])} corpus fingerprints"
        )
