"""export_frame PROJECT FILE: the project's promoted frame as YAML, to keep in a repository.

`propose PROJECT --from-file FILE` reads the same file back: frames as code (docs/ci.md). The
file holds the frame alone, as corpus.yaml writes a project's `frame:`; the header comment names
the version it was exported from and is not read back.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from django.core.management.base import BaseCommand, CommandError

from authority.selectors import current_frame_version
from selection.models import Project


def frame_yaml(project: Project) -> str:
    current = current_frame_version(project=project)
    if current is None:
        raise CommandError(f"{project.slug} has no promoted frame version to export")
    header = (
        f"# The frame of {project.slug}, v{current.number} when exported. Edit it and run\n"
        f"#   manage.py propose {project.slug} --from-file THIS_FILE --user LEAD\n"
        "# to propose the change (a JSON Merge Patch from the promoted frame to this one).\n"
    )
    return header + yaml.safe_dump(current.snapshot, sort_keys=False, allow_unicode=True, width=100)


class Command(BaseCommand):
    help = "Write a project's promoted frame to a YAML file (read back by propose --from-file)."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("file", help="the YAML file to write (- for standard output)")

    def handle(self, *args, project, file, **options):
        try:
            row = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f'no project "{project}"') from None
        text = frame_yaml(row)
        if file == "-":
            self.stdout.write(text, ending="")
            return
        try:
            Path(file).write_text(text, encoding="utf-8")
        except OSError as error:
            raise CommandError(f"cannot write {file}: {error.strerror}") from error
        self.stderr.write(f"wrote {file}: {row.slug} v{current_frame_version(project=row).number}")
