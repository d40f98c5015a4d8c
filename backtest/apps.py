from django.apps import AppConfig


class BacktestConfig(AppConfig):
    name = "backtest"
    verbose_name = "Backtests"

    def ready(self) -> None:
        # frame health: imports, task-set changes and promotions queue a reading (audit listener)
        from .health import services as health_services

        health_services.connect()
