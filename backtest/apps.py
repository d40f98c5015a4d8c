from django.apps import AppConfig

from governance.evidence import register_evidence_source
from governance.health import register_health_source
from governance.signals import proposal_submitted


class BacktestConfig(AppConfig):
    name = "backtest"
    verbose_name = "Backtests"

    def ready(self) -> None:
        # governance sits below: it learns of backtests only through these two hooks
        from . import selectors, services
        from .health import selectors as health_selectors
        from .health import services as health_services

        register_evidence_source(selectors.EVIDENCE)
        # frame health: imports, task-set changes and promotions queue a reading (audit listener);
        # governance's project page and inboxes show it through their health hook
        health_services.connect()
        register_health_source(health_selectors.HEALTH)
        proposal_submitted.connect(services.on_proposal_submitted, dispatch_uid="backtest-on-proposal")
