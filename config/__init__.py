"""The Django project package: settings, URLs, the API site, the Celery app and the embedded servers."""

from .celery import app as celery_app

__all__ = ("celery_app",)
