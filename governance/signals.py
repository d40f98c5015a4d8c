"""Signals governance sends for the apps above it (it never imports them).

proposal_submitted(sender=Proposal, proposal, requested_by) is sent inside the transaction that
stores the proposal; a receiver that starts work must defer it with transaction.on_commit.
"""

from django.dispatch import Signal

proposal_submitted = Signal()
