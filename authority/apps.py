from django.apps import AppConfig


class AuthorityConfig(AppConfig):
    name = "authority"
    verbose_name = "Authority: roles, frame versions, audit"
