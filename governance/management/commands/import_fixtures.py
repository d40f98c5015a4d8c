"""Import every shipped corpus not loaded yet (what `make demo` loads): the dev corpora under
fixtures/ and the test corpora under fixtures/test/, each named with its split."""

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from selection.corpus.splits import shipped_corpora
from selection.models import Corpus


class Command(BaseCommand):
    help = (
        "Import every corpus directory under fixtures/ (dev split) and fixtures/test/ (test split) "
        "whose name is not loaded yet."
    )

    def handle(self, *args, **options):
        base = Path(settings.BASE_DIR)
        try:
            corpora = shipped_corpora(base / "fixtures")
        except ValueError as error:
            raise CommandError(str(error)) from error
        for corpus in corpora:
            if corpus.name and Corpus.objects.filter(name=corpus.name).exists():
                self.stdout.write(f"{corpus.name} ({corpus.split} split): already loaded")
                continue
            self.stdout.write(f"{corpus.name} ({corpus.split} split): {corpus.directory.relative_to(base)}")
            call_command("import_corpus", str(corpus.directory), stdout=self.stdout, stderr=self.stderr)
