"""`python manage.py local_memory {add,list,remove}`: one user's private units in one project (local
overlays), stored apart from the corpus and never exported."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from selection.memory.local_overlays import LocalOverlayError, local_unit_put, local_unit_remove
from selection.models import LocalUnit, Project


class Command(BaseCommand):
    help = "Add, list or remove a user's local overlay units in a project."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=("add", "list", "remove"))
        parser.add_argument("--user", required=True)
        parser.add_argument("--project", required=True)
        parser.add_argument("--id", dest="uid", help="local unit id (add, remove)")
        parser.add_argument("--text", help="the unit's text (add)")
        parser.add_argument("--class", dest="evidence_class", default="preference")
        parser.add_argument("--title", default="")
        parser.add_argument("--subject", default="")
        parser.add_argument("--facet", default="")
        parser.add_argument("--supersedes", action="append", default=[])

    def handle(self, *args, **o):
        user = get_user_model().objects.filter(username=o["user"]).first()
        if user is None:
            raise CommandError(f'no user "{o["user"]}"')
        project = Project.objects.filter(slug=o["project"]).first()
        if project is None:
            raise CommandError(f'no project "{o["project"]}"')
        if o["action"] == "list":
            for unit in LocalUnit.objects.filter(user=user, project=project).order_by("uid"):
                self.stdout.write(f"{unit.uid:30} {unit.evidence_class:14} {unit.text[:80]}")
            return
        if not o["uid"]:
            raise CommandError("--id is required")
        if o["action"] == "remove":
            if not local_unit_remove(user=user, project=project, uid=o["uid"]):
                raise CommandError(f'no local unit "{o["uid"]}"')
            self.stdout.write(f"removed {o['uid']}")
            return
        try:
            local_unit_put(
                user=user, project=project, uid=o["uid"], text=o["text"] or "",
                evidence_class=o["evidence_class"], title=o["title"], subject=o["subject"],
                facet=o["facet"], supersedes=tuple(o["supersedes"]),
            )
        except LocalOverlayError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"saved {o['uid']} (checked against shared memory at each selection)")
