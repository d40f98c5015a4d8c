"""`python manage.py export_memory SLUG DIR`: a project imported from markdown memory written back
as the MemoryCustodian layout under DIR/docs/memory (unchanged parts byte for byte)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from selection.corpus import CorpusError
from selection.memory.markdown_import import memory_export
from selection.models import Project


class Command(BaseCommand):
    help = "Write a project's memory back as DIR/docs/memory."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("directory", help="where docs/memory is written")

    def handle(self, *args, **o):
        try:
            written = memory_export(o["project"], o["directory"])
        except Project.DoesNotExist:
            raise CommandError(f'no project "{o["project"]}"') from None
        except CorpusError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(f"wrote {len(written)} files under {o['directory']}/docs/memory"))
