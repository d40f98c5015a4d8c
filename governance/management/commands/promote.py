"""promote PROPOSAL_ID --user NAME: proposal_promote, as the dashboard calls it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from authority.access import AccessDenied
from governance.management.commands.propose import _user
from governance.models import Proposal
from governance.proposals import promotion as promotions
from governance.proposals.errors import PromotionRefused


class Command(BaseCommand):
    help = "Promote a proposal whose latest backtest passed and is approved."

    def add_arguments(self, parser):
        parser.add_argument("proposal", type=int, help="proposal id")
        parser.add_argument("--user", required=True, help="username of the promoting lead")

    def handle(self, *args, proposal, user, **options):
        lead = _user(user)
        try:
            proposal_row = Proposal.objects.select_related("project").get(pk=proposal)
        except Proposal.DoesNotExist:
            raise CommandError(f"no proposal {proposal}") from None
        try:
            promotion = promotions.proposal_promote(proposal=proposal_row, lead=lead)
        except AccessDenied as error:
            raise CommandError(f"access denied: {error}") from error
        except PromotionRefused as error:
            raise CommandError(
                "\n".join(["promotion refused:", *(f"  {r}" for r in error.reasons)])
            ) from error
        self.stdout.write(
            f"{proposal_row.project.slug}: v{promotion.frame_version.number} is current "
            f"(promotion {promotion.sequence})"
        )
