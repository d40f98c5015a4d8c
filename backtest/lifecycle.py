"""The Django signal a backtest sends as it moves on, for the app above that keeps a proposal's state.

backtest_changed(sender=Backtest, backtest) is sent inside the transaction of each write that moves a
backtest on (started, finished, failed, reviewed); a receiver reaches the proposal through
`backtest.proposal` and writes in the same transaction.
"""

from django.dispatch import Signal

backtest_changed = Signal()
