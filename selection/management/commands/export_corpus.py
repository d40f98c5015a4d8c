"""`python manage.py export_corpus NAME DIR`: a loaded corpus, back in the interchange format."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from selection.corpus import CorpusError
from selection.memory.exporting import corpus_export


class Command(BaseCommand):
    help = "Write the loaded corpus NAME into DIR in the interchange format."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the corpus name")
        parser.add_argument("directory", help="where to write it (created if missing)")
        parser.add_argument(
            "--frames",
            choices=("initial", "current"),
            default="initial",
            help="initial: the imported frames, which proposals.yaml patches (default); "
            "current: the promoted frames",
        )
        parser.add_argument(
            "--overwrite", action="store_true", help="replace corpus files already in DIR"
        )

    def handle(self, *args, **options):
        try:
            written = corpus_export(
                options["name"],
                options["directory"],
                frames=options["frames"],
                overwrite=options["overwrite"],
            )
        except CorpusError as error:
            for issue in error.issues:
                self.stderr.write(f"  {issue}")
            raise CommandError(f"{options['name']} was not exported") from None
        except FileExistsError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(f"exported {options['name']} to {written}"))
