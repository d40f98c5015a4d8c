"""Import every corpus under fixtures/ that is not loaded yet (what `make demo` loads)."""

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from selection.models import Corpus


class Command(BaseCommand):
    help = "Import every corpus directory under fixtures/ whose name is not loaded yet."

    def handle(self, *args, **options):
        import yaml

        root = Path(settings.BASE_DIR) / "fixtures"
        for corpus_yaml in sorted(root.glob("*/corpus.yaml")):
            name = (yaml.safe_load(corpus_yaml.read_text()) or {}).get("name")
            if name and Corpus.objects.filter(name=name).exists():
                self.stdout.write(f"{name}: already loaded")
                continue
            call_command(
                "import_corpus", str(corpus_yaml.parent), stdout=self.stdout, stderr=self.stderr
            )
