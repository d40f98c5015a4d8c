"""propose PROJECT --title T --patch FILE.json --user NAME: proposal_submit, as the UI calls it.

propose PROJECT --from-file FRAME.yaml --user NAME: the whole frame as export_frame writes it; the
proposal's patch is the JSON Merge Patch from the promoted frame to that one (frames as code,
docs/ci.md). The first line printed is "proposal N: ...", which a CI job reads the number from.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authority.access import AccessDenied
from authority.selectors import current_frame_version
from governance.proposals import services
from governance.proposals.errors import ProposalInvalid
from rules import frame_patch
from selection.models import Project


class Command(BaseCommand):
    help = "Propose a frame change: a JSON Merge Patch over the project's current promoted frame."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("--title", default="", help="required with --patch; --from-file names the file")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--patch", help="a JSON file holding the merge patch")
        source.add_argument(
            "--from-file", dest="from_file", help="a YAML file holding the whole frame (as export_frame writes it)"
        )
        parser.add_argument("--rationale", default="")
        parser.add_argument("--user", required=True, help="username of the proposing lead")

    def handle(self, *args, project, title, patch, rationale, user, from_file=None, **options):
        author = _user(user)
        try:
            project_row = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f'no project "{project}"') from None
        if from_file:
            patch_value = _frame_patch(project_row, Path(from_file))
            title = title or f"{project_row.slug} frame from {Path(from_file).name}"
            return self._submit(project_row, author, title, rationale, patch_value)
        if not title.strip():
            raise CommandError("--title is required with --patch")
        path = Path(patch)
        try:
            patch_value = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from error
        except json.JSONDecodeError as error:
            raise CommandError(f"{path} is not JSON: {error}") from error
        except (RecursionError, ValueError) as error:
            raise CommandError(f"{path} is not a JSON patch this server takes: {error!r}") from error
        self._submit(project_row, author, title, rationale, patch_value)

    def _submit(self, project_row, author, title, rationale, patch_value):
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


def _frame_patch(project: Project, path: Path) -> dict:
    """The merge patch from the promoted frame to the frame in `path`."""
    try:
        frame = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise CommandError(f"{path} is not YAML: {error}") from error
    if not isinstance(frame, dict):
        raise CommandError(f"{path} must hold a frame: a mapping of frame keys (as export_frame writes it)")
    current = current_frame_version(project=project)
    if current is None:
        raise CommandError(f"{project.slug} has no promoted frame version to propose over")
    return frame_patch.compute_patch(current.snapshot, frame)


def _user(username: str):
    try:
        return get_user_model().objects.get(username=username, is_active=True)
    except get_user_model().DoesNotExist:
        raise CommandError(f'no active user "{username}"') from None
