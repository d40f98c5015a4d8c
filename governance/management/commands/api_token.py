"""`python manage.py api_token USER [--project P --role R] [--days N] [--name NAME]`: create a token.

R is a role USER holds in P, or `agent` (USER leads or reviews P): an agent token selects, writes
memory and reports outcomes in P, and nothing else.

The same service as the API tokens page (tokens.services.token_create): the scope must be a role
USER holds, creation is audited, and the secret is printed once, alone on stdout, for scripts.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authority import access
from governance.tokens import services as tokens
from selection.models import Project


class Command(BaseCommand):
    help = "Create a personal API token for USER (one role in one project, or read only) and print it once."

    def add_arguments(self, parser):
        parser.add_argument("user")
        parser.add_argument("--project", help="the project the token is limited to (with --role)")
        parser.add_argument(
            "--role",
            choices=["lead", "reviewer", "auditor", access.AGENT_SCOPE],
            help="a role USER holds there, or agent: select, write memory and report outcomes only",
        )
        parser.add_argument("--days", type=int, default=tokens.DEFAULT_LIFETIME_DAYS, choices=tokens.LIFETIMES_DAYS)
        parser.add_argument("--name", default="cli")

    def handle(self, *args, user, project, role, days, name, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f'no user "{user}"')
        scoped = None
        if project:
            scoped = Project.objects.filter(slug=project).first()
            if scoped is None:
                raise CommandError(f'no project "{project}"')
        try:
            issued = tokens.token_create(user=owner, name=name, project=scoped, role=role, days=days)
        except (access.AccessDenied, tokens.TokenRefused) as error:
            raise CommandError(str(error)) from error
        self.stdout.write(issued.secret)
