"""verify_traces [--project P]: recompute each project's trace hash chain; name every broken link."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from selection.models import Project
from selection.traces.chain import verify_chains


class Command(BaseCommand):
    help = "Verify the hash chain of every project's traces (or one project's); exit 1 on a broken link."

    def add_arguments(self, parser):
        parser.add_argument("--project", help="project slug (default: every project)")

    def handle(self, *args, project=None, **options):
        projects = Project.objects.order_by("slug")
        if project:
            projects = projects.filter(slug=project)
            if not projects.exists():
                raise CommandError(f'no project "{project}"')
        broken = 0
        for report in verify_chains(projects):
            if report.intact:
                self.stdout.write(f"{report.project}: {report.traces} traces, chain intact{report.tombstones}")
                continue
            broken += len(report.broken)
            self.stdout.write(
                self.style.ERROR(
                    f"{report.project}: {report.traces} traces, {len(report.broken)} broken link"
                    f"{'s' if len(report.broken) != 1 else ''}"
                )
            )
            for link in report.broken:
                self.stdout.write(f"  {link}")
        if broken:
            raise CommandError(f"{broken} broken link{'s' if broken != 1 else ''} in the trace chain")
