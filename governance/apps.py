from django.apps import AppConfig

from backtest.lifecycle import backtest_changed
from selection.memory.corpus_parts import register_corpus_part


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        # proposals.yaml is governance's part of a corpus: selection's importer calls it back
        from .corpus import PROPOSALS

        register_corpus_part(PROPOSALS)
        # webhooks: the audit log's events of a project, signed and POSTed to its endpoints
        from .webhooks.services import connect

        connect()
        # a proposal's state follows its backtests: the backtest app sends, it never imports us
        from .proposals.services import on_backtest_changed

        backtest_changed.connect(on_backtest_changed, dispatch_uid="governance-proposal-state")
