"""`python manage.py record_outcome TRACE --verdict failed --user NAME`: record how a bundle served
its work on a stored trace (the same service as POST /api/v1/traces/<id>/outcomes)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from selection.models import OutcomeVerdict
from selection.serving.selections import SelectionError
from selection.traces.outcomes import outcome_report


class Command(BaseCommand):
    help = (
        "Record an outcome on a trace. --verdict failed says the answer failed although the "
        "evidence was present: the trace's attribution then reads E6 when no MUST unit was missed."
    )

    def add_arguments(self, parser):
        parser.add_argument("trace", type=int, help="trace id")
        parser.add_argument("--verdict", required=True, choices=list(OutcomeVerdict.values))
        parser.add_argument("--user", required=True, help="the reporting user's username")
        parser.add_argument("--note", default="")
        parser.add_argument("--missing", default="", help="comma-separated unit ids the work lacked")

    def handle(self, *args, **o):
        user = get_user_model().objects.filter(username=o["user"]).first()
        if user is None:
            raise CommandError(f'no user "{o["user"]}"')
        missing = [u.strip() for u in o["missing"].split(",") if u.strip()]
        try:
            outcome = outcome_report(
                user=user, trace_id=o["trace"], verdict=o["verdict"], note=o["note"], missing_units=missing
            )
        except Http404:
            raise CommandError(f"no trace {o['trace']}") from None
        except PermissionDenied as error:
            raise CommandError(f"{o['user']} may not report on trace {o['trace']}: {error}") from None
        except SelectionError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"recorded outcome {outcome.pk} on trace {o['trace']}: {outcome.verdict}")
