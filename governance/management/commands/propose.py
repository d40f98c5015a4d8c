"""propose PROJECT --title T --patch FILE.json --user NAME: proposal_submit, as the UI calls it."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authority.access import AccessDenied
from governance.proposals import services
from governance.proposals.errors import ProposalInvalid
from selection.models import Project


class Command(BaseCommand):
    help = "Propose a frame change: a JSON Merge Patch over the project's current promoted frame."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("--title", required=True)
        parser.add_argument("--patch", required=True, help="a JSON file holding the merge patch")
        parser.add_argument("--rationale", default="")
        parser.add_argument("--user", required=True, help="username of the proposing lead")

    def handle(self, *args, project, title, patch, rationale, user, **options):
        author = _user(user)
        try:
            project_row = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f'no project "{project}"') from None
        path = Path(patch)
        try:
            patch_value = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from error
        except json.JSONDecodeError as error:
            raise CommandError(f"{path} is not JSON: {error}") from error
        except (RecursionError, ValueError) as error:
            raise CommandError(f"{path} is not a JSON patch this server takes: {error!r}") from error
        try:
            proposal = services.proposal_submit(
                project=project_row,
                author=author,
                title=title,
                rationale=rationale,
                patch=patch_value,
            )
        except AccessDenied as error:
            raise CommandError(f"access denied: {error}") from error
        except ProposalInvalid as error:
            raise CommandError(
                "proposal refused:\n" + "\n".join(f"  {issue}" for issue in error.issues)
            ) from error
        for warning in proposal.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        self.stdout.write(
            f"proposal {proposal.pk}: {project_row.slug} "
            f"v{proposal.base_version.number} -> v{proposal.frame_version.number}"
        )


def _user(username: str):
    try:
        return get_user_model().objects.get(username=username, is_active=True)
    except get_user_model().DoesNotExist:
        raise CommandError(f'no active user "{username}"') from None
