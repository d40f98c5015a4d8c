"""`python manage.py select`: one request parsed from the command line, served by serve.select_in_project,
the bundle and its trace rendered; the command checks nothing the service checks."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from selection.engine.policy import UnknownWorkType
from selection.engine.reason_codes import Disposition
from selection.engine.routing.report import routing_summary
from selection.engine.routing.types import RoutingInputs
from selection.engine.types import WorkSignal
from selection.models import Project
from selection.serving import server_client
from selection.serving.custodian_format import EXPLICIT_KINDS, FORMATS, custodian_output, custodian_overlays
from selection.serving.selections import SelectionError
from selection.serving.serve import StrictRoutingRefused, select_in_project


def read_signals(path: str) -> tuple[tuple[WorkSignal, ...], dict]:
    """A JSON file: a list of {id, kind, content}, or {"signals": [...], "cites": {field: [ids]}}."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise CommandError(f"{path}: {error}") from error
    items = doc.get("signals", []) if isinstance(doc, dict) else doc
    cites = doc.get("cites", {}) if isinstance(doc, dict) else {}
    signals = []
    for i, item in enumerate(items):
        if (
            not isinstance(item, dict)
            or set(item) - {"id", "kind", "content"}
            or not {"id", "kind", "content"} <= set(item)
        ):
            raise CommandError(
                f'{path}: signals[{i}] must have exactly the keys "id", "kind", "content"'
            )
        signals.append(
            WorkSignal(id=str(item["id"]), kind=item["kind"], content=str(item["content"]))
        )
    return tuple(signals), cites


def parse_time(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as error:
        raise CommandError(f"--standpoint: {value!r} is not an ISO 8601 time") from error
    if moment.tzinfo is None:
        raise CommandError(f"--standpoint: {value!r} has no time zone")
    return moment


class Command(BaseCommand):
    help = "Select context for a query under the project's promoted frame, and write its trace."
    # an agent's hook pays this per call: the system checks import every URL, API and MCP module
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True)
        parser.add_argument("--query", required=True)
        parser.add_argument("--objective", default="")
        parser.add_argument("--work-type", dest="work_type")
        parser.add_argument("--signals", help="JSON file of WorkSignals (and optional cites)")
        parser.add_argument(
            "--builder",
            default="default",
            help="frame builder: declared, cue, similarity or model (default: declared when "
            "--work-type is given, else the project frame's configured builder)",
        )
        parser.add_argument("--condition", default="C6")
        parser.add_argument("--budget", type=int, default=None)
        parser.add_argument("--standpoint")
        parser.add_argument(
            "--explain", action="store_true", help="print every candidate's disposition"
        )
        parser.add_argument(
            "--json", action="store_true", help="print the bundle and the trace as JSON"
        )
        parser.add_argument("--task-category", "--task", dest="task_category", help="canonical task category")
        parser.add_argument(
            "--format", dest="format", choices=FORMATS, default=None,
            help="mc-json / mc-text: MemoryCustodian's read envelope and explain text, with its exit codes",
        )
        parser.add_argument(
            "--project-root", dest="project_root", type=Path, help="mc formats: the repository of docs/memory"
        )
        for word in EXPLICIT_KINDS:  # the peer's --rule/--profile/--area, by short slug
            parser.add_argument(f"--{word}", dest=f"mc_{word}", action="append", default=[], help=f"a {word} by slug")
        parser.add_argument(
            "--path", dest="paths", action="append", default=[],
            help="path scope: a file planned, touched or inspected (repeatable; need not exist)",
        )
        parser.add_argument(
            "--overlay", dest="overlays", action="append", default=[],
            help="an area, profile or rule asked for by name (repeatable)",
        )
        parser.add_argument(
            "--strict-routing", dest="strict", action="store_true",
            help="no bundle unless routing is COMPLETE with no conflict (exit 1 or 2)",
        )
        parser.add_argument(
            "--no-local", dest="no_local", action="store_true",
            help="leave out the user's local overlay units (the shared bundle, on any machine)",
        )
        parser.add_argument("--user", help="whose local overlay units join the request")
        parser.add_argument("--served-by", dest="served_by", help=argparse.SUPPRESS)


    def handle(self, *args, **o):
        # the running server serves it when one answers (server_client); else this process does
        self.served = server_client.served_here_or_there(self, "select", o, ("signals",))
        if not self.served:
            return
        project = Project.objects.select_related("corpus").filter(slug=o["project"]).first()
        if project is None:
            raise CommandError(f'no project "{o["project"]}"')
        signals, cites = read_signals(o["signals"]) if o["signals"] else ((), {})
        requested = {word: o[f"mc_{word}"] for word in EXPLICIT_KINDS}
        missing: tuple = ()
        if any(requested.values()):
            try:
                extra, missing = custodian_overlays(project, requested)
            except (ValueError, SelectionError) as error:
                raise CommandError(str(error), returncode=2) from error
            o["overlays"] = [*o["overlays"], *extra]
        o["mc"] = (requested, missing)
        try:
            selection = select_in_project(
                project=project,
                user=self._user(o["user"]),
                query=o["query"],
                signals=signals,
                objective=o["objective"],
                work_type=o["work_type"],
                cites=cites,
                budget_tokens=o["budget"],
                condition=o["condition"],
                standpoint=parse_time(o["standpoint"]) if o["standpoint"] else None,
                source="select",
                builder=o["builder"],
                routing=RoutingInputs(
                    task_category=o["task_category"],
                    paths=tuple(o["paths"]),
                    overlays=tuple(o["overlays"]),
                    strict=o["strict"],
                    no_local=o["no_local"],
                ),
            )
        except StrictRoutingRefused as refused:
            # the refusal is traced: show what routing found, then exit with its status (1 or 2)
            status = self._write(refused.selection, o, project) or refused.status
            raise CommandError(str(refused), returncode=status) from refused
        except UnknownWorkType as error:
            # exit status 2: the request named a work type the frame does not list
            raise CommandError(str(error), returncode=2) from error
        except SelectionError as error:
            raise CommandError(str(error)) from error
        status = self._write(selection, o, project)
        if status:
            raise CommandError(f"MemoryCustodian read exits {status}", returncode=status)

    def _write(self, selection, o, project) -> int:
        """Print the selection; the peer's exit status under --format mc-*, else 0."""
        if o["format"] in ("mc-json", "mc-text"):
            requested, missing = o["mc"]
            out, status = custodian_output(
                selection, project, fmt=o["format"], requested=requested, missing=missing,
                explain=o["explain"], project_root=o["project_root"],
            )
            self.stdout.write(out, ending="" if o["format"] == "mc-text" else "\n")
            return status
        if o["json"] or o["format"] == "json":
            result = selection.result
            report = result.trace.routing
            doc = {
                "trace_id": selection.trace.pk,
                "routing": routing_summary(report) if report else None,
                "bundle": result.bundle.as_dict(),
                "trace": result.trace.as_dict(),
            }
            self.stdout.write(json.dumps(doc, indent=2, default=str))
        else:
            self._write_bundle(selection, o["explain"])
        return 0

    def _user(self, name):
        if not name:
            return None
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f'no user "{name}"')
        return user

    def _write_bundle(self, selection, explain):
        result = selection.result
        self.stdout.write(result.bundle.rendered)
        self.stdout.write(
            f"\n-- {len(result.bundle.items)} items, {result.bundle.tokens}/{result.bundle.budget_tokens} tokens, "
            f"digest {result.bundle.digest[:16]}, trace {selection.trace.pk}, condition "
            f"{result.trace.effective_condition}"
            + (f" ({result.trace.condition_note})" if result.trace.condition_note else "")
        )
        work = result.trace.work_frame
        margin = "" if work.margin is None else f", margin {work.margin:.3f} over {work.runner_up}"
        self.stdout.write(
            f"-- work frame {work.establishment} by {work.builder}: work type "
            f"{work.work_type or 'none'}{margin}; classes: {result.trace.class_order_reason}"
        )
        if result.trace.routing is not None:
            self._routing(result.trace.routing)
        if explain:
            self._explain(result)

    def _routing(self, report):
        self.stdout.write(f"\nRouting: {report.completeness}")
        for problem in report.problems:
            self.stdout.write(f"  ! {problem}")
        for d in report.dispositions:
            self.stdout.write(f"  {d.unit:32} {d.disposition:17} {d.reason:20} {d.detail}")
        for uid in report.budget_omissions:
            self.stdout.write(f"  {uid:32} {'budget omission':17} OMIT_BUDGET")
        for d in report.local:
            self.stdout.write(f"  local {d.unit:26} {d.outcome:38} {d.detail}")
        for c in report.conflicts:
            self.stdout.write(f"  conflict {c.code}: {', '.join(c.units)} ({c.subject} / {c.facet})")
        if report.refused:
            self.stdout.write(f"  REFUSED: {report.refusal}")

    def _explain(self, result):
        self.stdout.write("\nCandidates:")
        self.stdout.write(f"  {'unit':32} {'class':22} {'disposition':15} {'stage':12} reason")
        for c in result.trace.candidates:
            self.stdout.write(
                f"  {c.unit_id:32} {c.evidence_class:22} {c.disposition:15} {c.stage:12} {c.reason_code}"
            )
        omitted = [c for c in result.trace.candidates if c.disposition == Disposition.BUDGET_OMITTED]
        self.stdout.write("\nBudget omissions:" if omitted else "\nBudget omissions: none")
        for c in omitted:
            self.stdout.write(
                f"  {c.unit_id}: {c.unit_tokens} tokens, {c.budget.remaining} left of the budget when decided"
            )
        self.stdout.write(f"\nServed: {self.served}")
