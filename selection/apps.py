from django.apps import AppConfig


class SelectionConfig(AppConfig):
    name = "selection"
    verbose_name = "Memory and selection"

    def ready(self):
        from selection import telemetry

        telemetry.configure_from_env()  # opt-in: OTEL_TRACES_EXPORTER=console|otlp
