"""The emergency revert's two actions on a rollback proposal's page: a lead asks, a second person confirms."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from . import revert, selectors
from .errors import PromotionRefused, ProposalInvalid


@login_required
@require_POST
def proposal_revert_request(request, pk: int):
    proposal = selectors.proposal_by_id(proposal_id=pk)
    try:
        revert.revert_request(lead=request.user, proposal=proposal, reason=request.POST.get("reason", ""))
    except ProposalInvalid as error:
        messages.error(request, "Not asked: " + "; ".join(i.message for i in error.issues) + ".")
    else:
        messages.success(
            request,
            f"Asked to restore v{proposal.restores.number} at once: another lead or a reviewer of "
            f"{proposal.project.slug} confirms it on this page.",
        )
    return redirect("proposal-detail", pk=pk)


@login_required
@require_POST
def proposal_revert_confirm(request, pk: int):
    proposal = selectors.proposal_by_id(proposal_id=pk)
    try:
        promoted = revert.revert_confirm(proposal=proposal, confirmer=request.user)
    except PromotionRefused as error:
        messages.error(request, "Not restored: " + "; ".join(error.reasons) + ".")
    else:
        messages.success(
            request,
            f"v{proposal.restores.number} is restored: v{promoted.frame_version.number} is current for "
            f"{proposal.project.slug}; its backtest runs now, against the version it replaced, "
            "and its verdict shows here.",
        )
    return redirect("proposal-detail", pk=pk)
