"""Outside the embedded mode: no silent fallback, hardened settings, a throttled login."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from config.settings import database_from_url

ROOT = Path(__file__).resolve().parents[2]


def production_env(**changes) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FG_", "DJANGO_", "CELERY_"))}
    env.update(
        DATABASE_URL="postgresql://fg:secret@127.0.0.1:1/fg?sslmode=verify-full&connect_timeout=5",
        CELERY_BROKER_URL="redis://127.0.0.1:1/0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(60),
        DJANGO_ALLOWED_HOSTS="governance.example.org",
        FG_STATE_DIR=str(ROOT / ".state" / "deploy-check"),
    )
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def manage(*args, **env_changes) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=production_env(**env_changes),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_under_production_settings():
    done = manage("check", "--deploy")
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_without_https_check_deploy_says_what_is_missing():
    done = manage("check", "--deploy", FG_HTTPS="0")
    assert "security.W004" in done.stderr + done.stdout  # no HSTS
    assert "security.W008" in done.stderr + done.stdout  # no redirect to HTTPS


def test_a_missing_broker_is_a_start_up_error_not_a_private_redis():
    done = manage("check", CELERY_BROKER_URL=None)
    assert done.returncode != 0
    assert "environment variable CELERY_BROKER_URL is required" in done.stderr
    assert not (ROOT / ".state" / "deploy-check" / "redis").exists()


def test_the_tls_proxy_switch_trusts_the_forwarded_proto_header():
    code = "from django.conf import settings as s; print(s.SECURE_PROXY_SSL_HEADER, s.SESSION_COOKIE_SECURE)"
    shell = manage("shell", "--no-imports", "-c", code, FG_TLS_PROXY="1")
    assert shell.stdout.strip() == "('HTTP_X_FORWARDED_PROTO', 'https') True", shell.stderr
    assert manage("shell", "--no-imports", "-c", code).stdout.strip() == "None True"


def test_database_url_query_parameters_become_connection_options():
    database = database_from_url(
        "postgresql://u%40x:p%2Fw@db.example.org:6432/gov?sslmode=verify-full&sslrootcert=/ca.pem&connect_timeout=5"
    )
    assert database == {
        "NAME": "gov",
        "USER": "u@x",
        "PASSWORD": "p/w",
        "HOST": "db.example.org",
        "PORT": "6432",
        "OPTIONS": {"sslmode": "verify-full", "sslrootcert": "/ca.pem", "connect_timeout": "5"},
    }
    assert "OPTIONS" not in database_from_url("postgresql://u:p@h/n")
    assert database_from_url("postgresql:///n?host=/run/pg")["HOST"] == "/run/pg"


@pytest.mark.django_db
def test_login_is_throttled_after_repeated_failures(client, django_user_model, settings):
    django_user_model.objects.create_user("lead", password="a long passphrase 42")
    django_user_model.objects.create_user("other", password="another passphrase 7")
    url = reverse("login")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post(url, {"username": "lead", "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    assert client.post(url, {"username": "lead", "password": "wrong"}).status_code == 429
    locked = client.post(url, {"username": "lead", "password": "a long passphrase 42"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # another account from the same address is not locked out by someone else's failures
    response = client.post(url, {"username": "other", "password": "another passphrase 7"})
    assert response.status_code == 302 and client.session["_auth_user_id"]


def test_passwords_are_checked_by_the_strong_validators(db):
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    for weak in ("short1", "123456789012", "password1234"):
        with pytest.raises(ValidationError):
            validate_password(weak)
    validate_password("a long passphrase 42")
