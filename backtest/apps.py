from django.apps import AppConfig


class BacktestConfig(AppConfig):
    name = "backtest"
    verbose_name = "Backtests"
