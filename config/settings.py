"""Settings read the environment through one helper; the embedded servers are the default."""

from __future__ import annotations

import os
import secrets
import warnings
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from selection.memory.hnsw import support as hnsw_support

from . import embedded

BASE_DIR = Path(__file__).resolve().parent.parent
_REQUIRED = object()


def env(name: str, default=_REQUIRED) -> str:
    """Read one setting from the environment; a missing required value fails loudly."""
    value = os.environ.get(name)
    if value is None or value == "":
        if default is _REQUIRED:
            raise RuntimeError(f"environment variable {name} is required")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    return env(name, "1" if default else "0").lower() in ("1", "true", "yes", "on")


def database_from_url(url: str) -> dict:
    parts = urlparse(url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise RuntimeError(f"DATABASE_URL must be a postgresql:// URL, not {parts.scheme}://")
    query = parse_qs(parts.query)
    # every other query parameter (sslmode, sslrootcert, connect_timeout, options, ...) is a libpq
    # connection parameter: dropping it would, say, turn sslmode=verify-full into no TLS at all
    options = {key: values[-1] for key, values in query.items() if key != "host"}
    database = {
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": query.get("host", [parts.hostname or ""])[0],
        "PORT": str(parts.port or ""),
    }
    if options:
        database["OPTIONS"] = options
    return database


def _local_secret_key() -> str:
    path = embedded.STATE_DIR / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


EMBEDDED = not os.environ.get("DATABASE_URL")
DEBUG = env_bool("FG_DEBUG", EMBEDDED)
SECRET_KEY = _local_secret_key() if EMBEDDED else env("DJANGO_SECRET_KEY")
ALLOWED_HOSTS = env("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in env("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "ninja",
    "authority",
    "selection",
    "governance",
    "backtest",
    "bench",
    "config",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.csp.ContentSecurityPolicyMiddleware",
    # static files compressed and, once collected, hashed and cached for a year
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.api_site.ApiProblemMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if EMBEDDED:
    _db = embedded.ensure_postgres()
    _db["NAME"] = env("FG_DATABASE_NAME", _db["NAME"])
else:
    _db = database_from_url(env("DATABASE_URL"))
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        **_db,
        "CONN_MAX_AGE": int(env("FG_CONN_MAX_AGE", "0")),
        "TEST": {"NAME": env("FG_TEST_DATABASE_NAME", f"test_{_db['NAME']}")},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# outside the embedded mode a broker is required: a private redis would keep nothing and no
# worker elsewhere would ever see a backtest
CELERY_BROKER_URL = (
    os.environ.get("CELERY_BROKER_URL") or embedded.ensure_redis() if EMBEDDED else env("CELERY_BROKER_URL")
)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or CELERY_BROKER_URL


def redis_cache_location(url: str) -> str:
    """The broker's redis as redis-py names it (kombu writes a unix socket redis+socket://)."""
    parts = urlparse(url)
    if parts.scheme == "redis+socket":
        database = parse_qs(parts.query).get("virtual_host", ["0"])[0]
        return f"unix://{parts.path}?db={database}"
    return url


# the rate limits' counters live in the broker's redis, shared by every web process
# (authority/ratelimits.py); short time-outs: without redis a request is let through at once
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "ratelimits": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": redis_cache_location(CELERY_BROKER_URL),
        "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5},
    }
    if CELERY_BROKER_URL.startswith(("redis", "rediss", "unix"))
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
}
# requests per seconds, for each API token and for each user (all their tokens and session):
# FG_RATE_<KIND>="<requests>/<seconds>" per token, FG_RATE_<KIND>_USER per user; 0 requests: no
# limit (docs/trust.md)
_RATE_DEFAULTS = {
    "select": ("600/60", "1200/60"),
    "write": ("120/60", "240/60"),
    "evaluation": ("20/600", "40/600"),
    "upload": ("10/600", "20/600"),
}
FG_RATE_LIMITS = {
    kind: {"token": env(f"FG_RATE_{kind.upper()}", token), "user": env(f"FG_RATE_{kind.upper()}_USER", user)}
    for kind, (token, user) in _RATE_DEFAULTS.items()
}
FG_RATE_KEY_PREFIX = env("FG_RATE_KEY_PREFIX", "fg-rate")
# a failed webhook delivery waits this × 2^attempt before the next (5 attempts in all)
FG_WEBHOOK_BACKOFF_SECONDS = float(env("FG_WEBHOOK_BACKOFF_SECONDS", "2"))
# webhooks POST to https targets at public addresses only (governance/webhooks/targets.py, docs/trust.md):
# plain http is for development; the allow-list names hosts or networks inside that may be reached
FG_WEBHOOK_ALLOW_HTTP = env_bool("FG_WEBHOOK_ALLOW_HTTP", False)
FG_WEBHOOK_ALLOWED_HOSTS = [h.strip() for h in env("FG_WEBHOOK_ALLOWED_HOSTS", "").split(",") if h.strip()]
FG_WEBHOOK_CONNECT_TIMEOUT = float(env("FG_WEBHOOK_CONNECT_TIMEOUT", "5"))
FG_WEBHOOK_READ_TIMEOUT = float(env("FG_WEBHOOK_READ_TIMEOUT", "10"))
CELERY_TASK_DEFAULT_QUEUE = env("FG_CELERY_QUEUE", "frame-governance")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# a message a vanished worker had taken goes back to the queue after this many seconds (redis's
# default is an hour); it must exceed the longest task, so it is kept above the hard time limit
FG_REPLAY_SOFT_TIME_LIMIT = int(env("FG_REPLAY_SOFT_TIME_LIMIT", "60"))
FG_REPLAY_TIME_LIMIT = int(env("FG_REPLAY_TIME_LIMIT", "90"))
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(env("FG_VISIBILITY_TIMEOUT", "300")),
    # a worker looks for such messages every interval × throttle seconds (kombu's defaults: 10 × 10)
    "unacked_restore_interval": int(env("FG_UNACKED_RESTORE_INTERVAL", "10")),
    "unacked_restore_throttle": int(env("FG_UNACKED_RESTORE_THROTTLE", "10")),
}
# a queued or running backtest with no new replay for this long is marked failed (stale)
FG_BACKTEST_STALE_SECONDS = int(env("FG_BACKTEST_STALE_SECONDS", "600"))
# a backtest's replays go to the workers in chunks of this many (task, side) pairs, each chunk
# written in one transaction; smaller chunks when that would leave fewer than FG_BACKTEST_MIN_CHUNKS
FG_BACKTEST_CHUNK = int(env("FG_BACKTEST_CHUNK", "16"))
FG_BACKTEST_MIN_CHUNKS = int(env("FG_BACKTEST_MIN_CHUNKS", "4"))
# `celery -A config beat` runs the retention policy daily (selection.tasks.apply_retention)
# and reads every promoted frame on its project's tasks (backtest.health, the frame's health)
CELERY_BEAT_SCHEDULE = {
    "apply-retention": {
        "task": "selection.apply_retention",
        "schedule": crontab(hour=int(env("FG_RETENTION_HOUR", "3")), minute=30),
    },
    "frame-health": {
        "task": "backtest.frame_health_daily",
        "schedule": crontab(hour=int(env("FG_HEALTH_HOUR", "4")), minute=0),
    },
}
# an import, a task-set change or a promotion also queues a reading of its project's health
FG_HEALTH_ON_CHANGE = env_bool("FG_HEALTH_ON_CHANGE", True)
# a backtest also replays this many of the project's last live selections (shadow replay; 0: none)
FG_BACKTEST_SHADOW = int(env("FG_BACKTEST_SHADOW", "20"))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 12},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# login throttling (django-axes): a username and address pair is locked out for a while after
# FG_LOGIN_FAILURES failed logins; a success resets the count
INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(env("FG_LOGIN_FAILURES", "5"))
AXES_COOLOFF_TIME = float(env("FG_LOGIN_COOLOFF_HOURS", "0.25"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# behind a proxy the client address is the proxy's unless this names the forwarded header
AXES_IPWARE_META_PRECEDENCE_ORDER = [env("FG_CLIENT_IP_HEADER")] if env("FG_CLIENT_IP_HEADER", "") else ["REMOTE_ADDR"]

if not EMBEDDED:
    # served over HTTPS: cookies never travel in clear, browsers remember to use HTTPS (HSTS).
    # FG_HTTPS=0 turns the redirect and HSTS off (a private network, at your own risk);
    # FG_TLS_PROXY=1 trusts X-Forwarded-Proto from the proxy that terminates TLS (docs in README).
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"
    if env_bool("FG_HTTPS", True):
        SECURE_SSL_REDIRECT = True
        SECURE_HSTS_SECONDS = int(env("FG_HSTS_SECONDS", "31536000"))
        SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("FG_HSTS_SUBDOMAINS", True)
        SECURE_HSTS_PRELOAD = env_bool("FG_HSTS_PRELOAD", True)
    if env_bool("FG_TLS_PROXY", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# plotly.js (the basic build) and htmx are vendored under static/vendor: no CDN
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = embedded.STATE_DIR / "collected-static"
# with DEBUG, WhiteNoise serves from the source folders; nothing needs to be collected first
warnings.filterwarnings("ignore", message="No directory at", module="whitenoise.base")
# Without DEBUG (`make demo`, production) static files are collected with content-hashed names and
# served by WhiteNoise gzip-compressed with a one-year immutable cache. With DEBUG (and so under
# pytest, whose DEBUG is switched off only after settings load) they come from the source folders.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Selection defaults; the engine itself reads no settings.
FG_DEFAULT_BUDGET = int(env("FG_DEFAULT_BUDGET", "1500"))
# the model frame builder: an OpenAI-compatible chat endpoint (Ollama, llama.cpp); off when unset
FG_READER_MODEL_URL = env("FG_READER_MODEL_URL", "")
FG_READER_MODEL_NAME = env("FG_READER_MODEL_NAME", "")
FG_READER_MODEL_TIMEOUT = float(env("FG_READER_MODEL_TIMEOUT", "30"))
# corpus archives uploaded through the API or the page wait here for their import job; the
# workers must see the same directory (one machine, or a shared volume)
FG_UPLOAD_DIR = env("FG_UPLOAD_DIR", str(embedded.STATE_DIR / "uploads"))
# engine indexes persisted for fast start-up (selection/memory/index_cache.py); empty: off
FG_INDEX_CACHE_DIR = env("FG_INDEX_CACHE_DIR", str(embedded.STATE_DIR / "index-cache"))
# the embedding model exported to ONNX, when FG_EMBEDDING_RUNTIME=onnx (one file per model version)
FG_EMBEDDING_CACHE_DIR = env("FG_EMBEDDING_CACHE_DIR", str(embedded.STATE_DIR / "embedding-cache"))
# dense search: "memory" (each process holds the vectors: exact, IVF from 50k units) or
# "pgvector-hnsw" (PostgreSQL answers from pgvector's HNSW index, shared by every process; build it
# with `manage.py hnsw_index`); refused with a clear message where pgvector would crash (selection/hnsw)
FG_DENSE_SEARCHER = env("FG_DENSE_SEARCHER", "memory")
if FG_DENSE_SEARCHER not in ("memory", "pgvector-hnsw"):
    raise RuntimeError(f"FG_DENSE_SEARCHER must be memory or pgvector-hnsw, not {FG_DENSE_SEARCHER!r}")
FG_HNSW_EF_SEARCH = int(env("FG_HNSW_EF_SEARCH", "200"))  # raised to k where k is larger
if FG_DENSE_SEARCHER == "pgvector-hnsw" and EMBEDDED:
    # refuse at start, before any process runs a vector operator the CPU cannot execute
    _refusal = hnsw_support.embedded_refusal(Path(FG_INDEX_CACHE_DIR) if FG_INDEX_CACHE_DIR else None)
    if _refusal is not None:
        raise ImproperlyConfigured(_refusal)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("FG_LOG_LEVEL", "WARNING")},
}
