"""The Django project package and the governance app: frames, proposals, reviews, roles, audit."""

from .celery import app as celery_app

__all__ = ("celery_app",)
