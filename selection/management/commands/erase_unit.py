"""erase_unit CORPUS UNIT --as USER --reason TEXT: erase a unit's text everywhere (a lead of its project)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authority.access import AccessDenied
from selection.memory.erasure import ErasureRefused, unit_erase
from selection.models import MemoryUnit


class Command(BaseCommand):
    help = (
        "Replace a unit's text and title, in the unit and in every trace and bundle that carries them, "
        'by "[erased by USER at TIME: REASON]"; traces keep their digests. USER must lead the unit\'s project.'
    )

    def add_arguments(self, parser):
        parser.add_argument("corpus", help="the corpus name")
        parser.add_argument("unit", help="the unit id")
        parser.add_argument("--as", dest="username", required=True, help="the lead who asks for the erasure")
        parser.add_argument("--reason", required=True, help="why (shown in the mark and the audit log)")

    def handle(self, *args, corpus, unit, username, reason, **options):
        lead = get_user_model().objects.filter(username=username).first()
        if lead is None:
            raise CommandError(f'no user "{username}"')
        row = MemoryUnit.objects.select_related("project").filter(corpus__name=corpus, uid=unit).first()
        if row is None:
            raise CommandError(f'no unit "{unit}" in corpus "{corpus}"')
        try:
            erasure = unit_erase(unit=row, lead=lead, reason=reason, via="command")
        except (AccessDenied, ErasureRefused) as error:
            raise CommandError(f"{unit} was not erased: {error}") from None
        self.stdout.write(f"{erasure.unit} erased from the unit and {len(erasure.traces)} trace(s): {erasure.mark}")
