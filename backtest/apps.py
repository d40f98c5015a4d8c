from django.apps import AppConfig

from governance.evidence import register_evidence_source
from governance.signals import proposal_submitted


class BacktestConfig(AppConfig):
    name = "backtest"
    verbose_name = "Backtests"

    def ready(self) -> None:
        # governance sits below: it learns of backtests only through these two hooks
        from . import selectors, services

        register_evidence_source(selectors.EVIDENCE)
        proposal_submitted.connect(services.on_proposal_submitted, dispatch_uid="backtest-on-proposal")
