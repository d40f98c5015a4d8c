"""apply_retention [--project P] [--dry-run]: expire traces past their project's retention policy."""

from __future__ import annotations

from datetime import UTC

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from selection.models import Project
from selection.traces.retention import retention_apply


class Command(BaseCommand):
    help = (
        "Turn every trace older than its project's retention (days per origin: evaluation, backtest, "
        "live) into a tombstone: payload removed, ids and digests kept. The daily beat task runs the same."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", help="project slug (default: every project with a policy)")
        parser.add_argument("--dry-run", action="store_true", help="count what would expire; change nothing")
        parser.add_argument(
            "--as-of", help="apply the policy as of this ISO date-time instead of now (a rehearsal, with --dry-run)"
        )

    def handle(self, *args, project=None, dry_run=False, as_of=None, **options):
        now = None
        if as_of:
            try:
                now = parse_datetime(as_of)
            except ValueError:
                now = None
            if now is None:
                raise CommandError(f"--as-of: an ISO date-time such as 2027-01-31T00:00:00Z, not {as_of!r}")
            if timezone.is_naive(now):
                now = timezone.make_aware(now, UTC)
        chosen = None
        if project:
            chosen = Project.objects.filter(slug=project).first()
            if chosen is None:
                raise CommandError(f'no project "{project}"')
        reports = retention_apply(project=chosen, dry_run=dry_run, now=now)
        if not reports:
            self.stdout.write("no retention policy applies: every trace is kept")
        for report in reports:
            self.stdout.write(str(report))
