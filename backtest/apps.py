from django.apps import AppConfig


class BacktestConfig(AppConfig):
    name = "backtest"
    verbose_name = "Backtests"

    def ready(self):
        # importing the selectors registers the finder that links a replayed trace to its backtest
        from . import selectors  # noqa: F401
