"""set_retention PROJECT --as USER [--evaluation-days N] [--backtest-days N] [--live-days N]: a lead's policy."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authority.access import AccessDenied
from selection.models import Project
from selection.traces.retention import RetentionRefused, retention_policy_set


class Command(BaseCommand):
    help = (
        "Set how many days a project's traces keep their payload, per origin (a lead of the project). "
        "An origin left out is kept for ever."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("--as", dest="username", required=True, help="a lead of the project")
        for origin in ("evaluation", "backtest", "live"):
            parser.add_argument(f"--{origin}-days", help=f"days {origin} traces keep their payload")

    def handle(self, *args, project, username, **options):
        lead = get_user_model().objects.filter(username=username).first()
        if lead is None:
            raise CommandError(f'no user "{username}"')
        chosen = Project.objects.filter(slug=project).first()
        if chosen is None:
            raise CommandError(f'no project "{project}"')
        try:
            policy = retention_policy_set(
                project=chosen,
                lead=lead,
                evaluation_days=options["evaluation_days"],
                backtest_days=options["backtest_days"],
                live_days=options["live_days"],
            )
        except (AccessDenied, RetentionRefused) as error:
            raise CommandError(f"the retention of {project} was not changed: {error}") from None
        kept = ", ".join(f"{o}: {'for ever' if d is None else f'{d} days'}" for o, d in policy.days().items())
        self.stdout.write(f"{project} keeps {kept}")
