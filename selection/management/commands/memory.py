"""`manage.py memory SUBCOMMAND PROJECT ... --as USER`: memory writes from a shell.

Subcommands: create, supersede UNIT..., refute UNIT, echo UNIT, support UNIT, close-loop UNIT,
reopen-loop UNIT, admit UNIT --reason, decline UNIT --reason, show UNIT, queue. Each calls the write
service the API, MCP and pages call (selection.memory.writes), as USER (`--as`); the answer is
printed as JSON. A unit is given by --class/--title/--text/... or --json (a units.jsonl object).
"""

from __future__ import annotations

import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authority import access
from authority.errors import GovernanceError
from selection.memory.writes import admission, services
from selection.memory.writes.records import unit_document
from selection.models import MemoryUnit, Project

LINKS = {"refute": services.unit_refute, "echo": services.unit_echo, "support": services.unit_support}
LOOPS = {"close-loop": services.loop_close, "reopen-loop": services.loop_reopen}
DECISIONS = {"admit": admission.unit_admit, "decline": admission.unit_decline}


def _unit_arguments(parser) -> None:
    parser.add_argument("--class", dest="evidence_class", help="the unit's class")
    parser.add_argument("--title")
    parser.add_argument("--text", help='the unit\'s text ("-": read it from stdin)')
    parser.add_argument("--subject")
    parser.add_argument("--facet")
    parser.add_argument("--valid-from", dest="valid_from", help="ISO 8601 with a zone")
    parser.add_argument("--open-loop", dest="open_loop", choices=["todo", "question", "expectation"])
    parser.add_argument("--json", dest="record", help="a units.jsonl object; the options above override it")


class Command(BaseCommand):
    help = "Write memory units (create, supersede, refute, echo, support, close or reopen a loop, admit, decline)."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="subcommand", required=True)
        for name in ("create", "supersede", *LINKS, *LOOPS, *DECISIONS, "show", "queue"):
            sub = commands.add_parser(name)
            sub.add_argument("project", help="the project's slug")
            if name == "supersede":
                sub.add_argument("units", nargs="+", help="the units the new one supersedes")
            elif name not in ("create", "queue"):
                sub.add_argument("unit", help="the unit id")
            sub.add_argument("--as", dest="username", required=True, help="who writes (a lead, or an agent's owner)")
            if name in ("create", "supersede", *LINKS):
                _unit_arguments(sub)
            if name in LINKS:
                sub.add_argument("--source", help="an existing unit given the link (instead of a new unit)")
            if name in DECISIONS:
                sub.add_argument("--reason", required=True)
            if name not in ("show", "queue", *DECISIONS):
                sub.add_argument("--idempotency-key", dest="key", help="apply this write at most once")

    def handle(self, *args, subcommand, project, username, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f'no user "{username}"')
        scoped = Project.objects.filter(slug=project).first()
        if scoped is None:
            raise CommandError(f'no project "{project}"')
        try:
            document = self._run(subcommand, user, scoped, options)
        except (access.AccessDenied, GovernanceError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(json.dumps(document, indent=1, sort_keys=True, default=str))

    def _run(self, subcommand, user, project, options):
        key = options.get("key")
        if subcommand == "create":
            return services.unit_create(actor=user, project=project, fields=self._fields(options), via="command",
                                        idempotency_key=key).document  # fmt: skip
        if subcommand == "supersede":
            return services.unit_supersede(actor=user, project=project, targets=options["units"],
                                           fields=self._fields(options), via="command",
                                           idempotency_key=key).document  # fmt: skip
        if subcommand in LINKS:
            fields = None if options.get("source") else self._fields(options)
            return LINKS[subcommand](actor=user, project=project, target=options["unit"], fields=fields,
                                     source=options.get("source"), via="command",
                                     idempotency_key=key).document  # fmt: skip
        if subcommand in LOOPS:
            return LOOPS[subcommand](actor=user, project=project, uid=options["unit"], via="command",
                                     idempotency_key=key).document  # fmt: skip
        if subcommand in DECISIONS:
            return DECISIONS[subcommand](actor=user, project=project, uid=options["unit"], reason=options["reason"],
                                         via="command").document  # fmt: skip
        access.access_read(user, project)
        if subcommand == "queue":
            return [unit_document(unit) for unit in admission.candidates_of(project).select_related("project")]
        unit = MemoryUnit.objects.select_related("project").filter(project=project, uid=options["unit"]).first()
        if unit is None:
            raise CommandError(f'{project.slug} holds no unit "{options["unit"]}"')
        return unit_document(unit)

    def _fields(self, options) -> dict:
        fields = {}
        if options.get("record"):
            try:
                fields = json.loads(options["record"])
            except json.JSONDecodeError as error:
                raise CommandError(f"--json is not JSON: {error}") from None
            if not isinstance(fields, dict):
                raise CommandError("--json is one units.jsonl object")
        text = options.get("text")
        if text == "-":
            text = sys.stdin.read()
        for key, value in (("class", options.get("evidence_class")), ("title", options.get("title")),
                           ("text", text), ("subject", options.get("subject")), ("facet", options.get("facet")),
                           ("valid_from", options.get("valid_from"))):  # fmt: skip
            if value is not None:
                fields[key] = value
        if options.get("open_loop"):
            fields["open_loop"] = {"status": "open", "kind": options["open_loop"]}
        return fields
