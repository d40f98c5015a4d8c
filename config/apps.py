from django.apps import AppConfig


class SiteConfig(AppConfig):
    """The project package as an app only for its site-wide commands (demo); it has no models."""

    name = "config"
    verbose_name = "Site"
