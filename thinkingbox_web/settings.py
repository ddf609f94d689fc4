"""Django settings, read from the environment (see docs/configuration.md for every variable)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from thinkingbox_web.env import (
    database_config,
    filesystem_broker_options,
    read_bool,
    read_int,
    read_list,
    secret_key,
)
from thinkingbox_web.static_cache import cache_versioned_vendor_files_for_good

env = os.environ
BASE_DIR = Path(__file__).resolve().parent.parent
# Everything the embedded mode writes (SQLite file, broker folders, generated secret) lives here.
DATA_DIR = Path(env.get("TB_DATA_DIR") or BASE_DIR / "data")

# The local demo (`run.py demo` sets TB_DEMO=1): served on loopback over http like DEBUG, but with
# debug off, so an error shows the plain error page, never settings or the environment.
DEMO = read_bool(env, "TB_DEMO", default=False)
DEBUG = read_bool(env, "DEBUG", default=not DEMO)
LOCAL = DEBUG or DEMO  # a developer's or the demo's machine: loopback hosts, http, a generated key
SECRET_KEY = secret_key(env, debug=LOCAL, data_dir=DATA_DIR)
ALLOWED_HOSTS = read_list(env, "ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"] if LOCAL else [])
CSRF_TRUSTED_ORIGINS = read_list(env, "CSRF_TRUSTED_ORIGINS", default=[])


def _discover_local_apps() -> list[str]:
    """Every package under apps/ with an apps.py, core first: new apps need no settings edit."""
    apps_dir = BASE_DIR / "apps"
    names = sorted(p.name for p in apps_dir.iterdir() if (p / "apps.py").is_file() and p.name != "core")
    return ["apps.core", *(f"apps.{name}" for name in names)]


LOCAL_APPS = _discover_local_apps()
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    *LOCAL_APPS,
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Login is required everywhere unless a view is marked @login_not_required (only /healthz,
    # the login page and Django's own auth views are).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "thinkingbox_web.urls"
WSGI_APPLICATION = "thinkingbox_web.wsgi.application"
ASGI_APPLICATION = "thinkingbox_web.asgi.application"

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
                "apps.core.context_processors.navigation",
            ],
        },
    },
]

DATABASES = {
    "default": database_config(
        env.get("DATABASE_URL"), DATA_DIR, conn_max_age=read_int(env, "DATABASE_CONN_MAX_AGE", 60)
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Sign-in goes through the rate limiter (apps.core.rate_limits): failures per account and per
# address in a fixed window; past the limit every try is refused unchecked until the window ends.
AUTHENTICATION_BACKENDS = ["apps.core.auth.RateLimitedModelBackend"]
LOGIN_FAILURES_PER_ACCOUNT = read_int(env, "TB_LOGIN_FAILURES_PER_ACCOUNT", 5)
LOGIN_FAILURES_PER_ADDRESS = read_int(env, "TB_LOGIN_FAILURES_PER_ADDRESS", 20)
TOKEN_FAILURES_PER_ADDRESS = read_int(env, "TB_TOKEN_FAILURES_PER_ADDRESS", 20)
RATE_LIMIT_WINDOW_SECONDS = read_int(env, "TB_RATE_LIMIT_WINDOW_SECONDS", 900)
# API requests per account (token or session) and per address (anonymous), DRF's "N/second|minute|hour|day".
API_RATE_PER_ACCOUNT = env.get("TB_API_RATE_PER_ACCOUNT", "1200/minute")
API_RATE_PER_ADDRESS = env.get("TB_API_RATE_PER_ADDRESS", "120/minute")
# The request header (Django META name, e.g. HTTP_X_REAL_IP) a trusted reverse proxy sets to the
# client's address; empty: the peer address (REMOTE_ADDR).
CLIENT_ADDRESS_HEADER = env.get("TB_CLIENT_ADDRESS_HEADER", "")
# Counts shared by every web process need Redis (TB_RATE_LIMIT_CACHE_URL, e.g. redis://redis:6379/1);
# without it each process counts alone. Figures stay in each process's memory (the default cache).
RATE_LIMIT_CACHE_URL = env.get("TB_RATE_LIMIT_CACHE_URL", "")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "default"},
    "rate-limits": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": RATE_LIMIT_CACHE_URL}
        if RATE_LIMIT_CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "rate-limits"}
    ),
}
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "core:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

FIXTURE_DIRS = [BASE_DIR / "fixtures"]

STATIC_URL = "static/"
STATIC_ROOT = Path(env.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Hashed, compressed names need `collectstatic`, which production images run at build time.
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if LOCAL or not read_bool(env, "STATIC_MANIFEST", default=True)
        else "whitenoise.storage.CompressedManifestStaticFilesStorage",
    },
}

# The demo (debug off) has no collectstatic step: WhiteNoise serves straight from the finders.
WHITENOISE_USE_FINDERS = read_bool(env, "WHITENOISE_USE_FINDERS", default=DEMO)
# plotly.js is vendored under a versioned name with a precompressed .gz beside it (WhiteNoise
# serves the .gz to clients that accept gzip): cache it for good even without collectstatic.
WHITENOISE_ADD_HEADERS_FUNCTION = cache_versioned_vendor_files_for_good

# --- Security (production values unless DEBUG or the demo; each can be switched by env, e.g. behind a proxy).
SECURE_SSL_REDIRECT = read_bool(env, "SECURE_SSL_REDIRECT", default=not LOCAL)
# Health probes come over plain http from inside the network (container healthcheck, LB).
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = read_bool(env, "SESSION_COOKIE_SECURE", default=not LOCAL)
CSRF_COOKIE_SECURE = read_bool(env, "CSRF_COOKIE_SECURE", default=not LOCAL)
SECURE_HSTS_SECONDS = read_int(env, "SECURE_HSTS_SECONDS", default=0 if LOCAL else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = read_bool(env, "SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not LOCAL)
SECURE_HSTS_PRELOAD = read_bool(env, "SECURE_HSTS_PRELOAD", default=False)
if read_bool(env, "SECURE_PROXY_SSL_HEADER", default=False):
    # Only trust X-Forwarded-Proto when a proxy we control sets it.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# HSTS preload is an opt-in commitment to browser vendors (SECURE_HSTS_PRELOAD=1), not a default.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
X_FRAME_OPTIONS = "DENY"

# --- Celery. Default broker is kombu's filesystem transport: a real worker process, no service.
CELERY_BROKER_URL = env.get("CELERY_BROKER_URL") or "filesystem://"
CELERY_BROKER_IS_FILESYSTEM = CELERY_BROKER_URL.startswith("filesystem:")
if CELERY_BROKER_IS_FILESYSTEM:
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(DATA_DIR)
    # Kombu's filesystem transport, writing whole messages and setting unreadable files aside.
    CELERY_BROKER_TRANSPORT = "thinkingbox_web.filesystem_broker:Transport"
else:
    # A worker that dies holding a message gets it redelivered after this many seconds (Redis).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": read_int(env, "CELERY_VISIBILITY_TIMEOUT", 3600)}
CELERY_RESULT_BACKEND = env.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TASK_DEFAULT_QUEUE = env.get("CELERY_TASK_DEFAULT_QUEUE") or "celery"
CELERY_TASK_ACKS_LATE = True
# Celery closes Django's database connections after every task unless told to reuse them; a new
# PostgreSQL connection per attempt cost about half of a worker's time. Tasks instead drop only
# broken or expired connections first (close_old_connections), as Django does per request.
CELERY_DB_REUSE_MAX = read_int(env, "CELERY_DB_REUSE_MAX", 1000)
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Retries a lost broker connection every 1-2 s and, once connected, asks for the messages a
# broker restart lost to be re-sent (thinkingbox_web.celery.Consumer / ResendLostMessages).
CELERY_WORKER_CONSUMER = "thinkingbox_web.celery:Consumer"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "core.record_heartbeat", "schedule": timedelta(minutes=1)},
    # Re-queues attempts of dead workers and re-sends messages lost with them.
    "attempts-sweep": {"task": "worker.sweep", "schedule": timedelta(seconds=30)},
    # Drift watches: evaluate finished runs, probe endpoints, start due runs (apps.drift.services).
    "drift-tick": {
        "task": "drift.tick",
        "schedule": timedelta(seconds=read_int(env, "TB_DRIFT_TICK_SECONDS", 60)),
    },
}
# --- Drift watch alerts: one JSON POST per alert (signed with the secret when set), and the site's
# public address for links in it.
DRIFT_WEBHOOK_URL = env.get("TB_DRIFT_WEBHOOK_URL", "")
DRIFT_WEBHOOK_SECRET = env.get("TB_DRIFT_WEBHOOK_SECRET", "")
DRIFT_WEBHOOK_TIMEOUT_SECONDS = read_int(env, "TB_DRIFT_WEBHOOK_TIMEOUT_SECONDS", 5)
PUBLIC_URL = env.get("TB_PUBLIC_URL", "")

# --- Attempt execution (apps/campaigns services, run by apps/worker): leases, retries of
# infrastructure errors, dispatch.
ATTEMPT_LEASE_SECONDS = read_int(env, "TB_ATTEMPT_LEASE_SECONDS", 60)
ATTEMPT_HEARTBEAT_SECONDS = read_int(env, "TB_ATTEMPT_HEARTBEAT_SECONDS", 2)
ATTEMPT_MAX_RETRIES = read_int(env, "TB_ATTEMPT_MAX_RETRIES", 3)
ATTEMPT_RETRY_BACKOFF_SECONDS = read_int(env, "TB_ATTEMPT_RETRY_BACKOFF_SECONDS", 2)
ATTEMPT_RETRY_BACKOFF_MAX_SECONDS = read_int(env, "TB_ATTEMPT_RETRY_BACKOFF_MAX_SECONDS", 60)
ATTEMPT_REDISPATCH_SECONDS = read_int(env, "TB_ATTEMPT_REDISPATCH_SECONDS", 120)
# A campaign's window: its attempts queued at the broker or running at once (Campaign.window, else
# this default), never above the maximum. The agent's max_concurrency caps its endpoint instead.
CAMPAIGN_DEFAULT_WINDOW = read_int(env, "TB_CAMPAIGN_DEFAULT_WINDOW", 256)
CAMPAIGN_MAX_WINDOW = read_int(env, "TB_CAMPAIGN_MAX_WINDOW", 256)
# Environment variables an agent (or user simulator, judge) may name as its API key: the worker
# sends that variable's value to the endpoint the operator picked. Comma-separated names or
# shell patterns; the worker's own settings (database, broker, Django) are refused regardless.
API_KEY_ENV_ALLOWED = read_list(env, "TB_API_KEY_ENV_ALLOWED", default=["TB_KEY_*"])
# Hosts agents, user simulators and judges may send requests to (tb_engine.llm.outbound): name
# patterns, addresses, networks. Loopback, private and link-local (cloud metadata) addresses are
# refused unless listed by address, network or exact name; "*" alone means any public host.
OUTBOUND_ALLOWED_HOSTS = read_list(env, "TB_OUTBOUND_ALLOWED_HOSTS", default=["*"])
# Response headers recorded per attempt with the response's model and system_fingerprint, so a
# provider-side change shows between runs (drift watch). Only headers that name a version belong
# here; per-request ones (x-request-id, processing time) would look like a change on every call.
PROVIDER_HEADERS = read_list(env, "TB_PROVIDER_HEADERS", default=["openai-version"])
# Threads-pool workers open every pool thread's database connection at start (one per thread).
WORKER_CONNECT_THREADS = read_bool(env, "TB_WORKER_CONNECT_THREADS", default=True)
# A threads pool of more attempts than this gives each attempt's connection back while it waits on
# its model (claim and record open one again): hundreds of waiting attempts, a handful of connections.
WORKER_HOLD_CONNECTIONS_UP_TO = read_int(env, "TB_WORKER_HOLD_CONNECTIONS_UP_TO", 16)
# A worker whose process tree (PSS: worker, fork servers, attempts' servers) uses more than this many
# MB takes no new attempt until some finish; the message returns to the queue after a few seconds.
WORKER_MEMORY_MB = read_int(env, "TB_WORKER_MEMORY_MB", 0)
# sys.setswitchinterval in worker processes, seconds (0: Python's default, 0.005).
WORKER_SWITCH_INTERVAL = float(env.get("TB_WORKER_SWITCH_INTERVAL", "0") or 0)
WORKER_MEMORY_RETRY_SECONDS = read_int(env, "TB_WORKER_MEMORY_RETRY_SECONDS", 5)

# --- ThinkingBox MCP servers (tb_engine.thinkingbox; docs/thinkingbox.md "Runtime"). How a fresh
# server process starts per attempt: fork (from a parent that imported the server module once) or
# spawn; the engine reads TB_MCP_START itself, it is checked here so a typo stops the process early.
THINKINGBOX_MCP_START = env.get("TB_MCP_START", "fork")
if THINKINGBOX_MCP_START not in ("fork", "spawn"):
    raise ImproperlyConfigured(f"TB_MCP_START={THINKINGBOX_MCP_START!r}: expected fork or spawn")
# Worker processes start the imported MCP domains' server pools (and fork servers) when they start.
THINKINGBOX_MCP_WARM = read_bool(env, "TB_MCP_WARM", default=True)
# Knowledge-base search (Typesense): a site default for suites without their own setting
# (manage.py thinkingbox_search). Keys never live in the database: a setting names the variable,
# and only the variables an admin lists here may be named.
THINKINGBOX_SEARCH_URL = env.get("TB_SEARCH_URL", "")
THINKINGBOX_SEARCH_KEY_ENV = env.get(
    "TB_SEARCH_KEY_ENV", "TYPESENSE_API_KEY" if THINKINGBOX_SEARCH_URL else ""
)
THINKINGBOX_SEARCH_KEY_ENVS = read_list(env, "TB_SEARCH_KEY_ENVS", ["TYPESENSE_API_KEY"])

# --- Logging: one console stream, level from LOG_LEVEL.
LOG_LEVEL = env.get("LOG_LEVEL", "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False}},
}

# --- API (apps/api builds on these): session login like the pages, OpenAPI via drf-spectacular.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ThinkingBox Web API",
    "VERSION": "0.1.0",
    "DESCRIPTION": "Token (`Authorization: Token <key>`) or session auth; roles as in the UI. See docs/api.md.",
    # Swagger UI's files come from the installed drf-spectacular-sidecar package, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Campaigns and attempts both have a `status` choice set; name each enum after its model.
    "ENUM_NAME_OVERRIDES": {
        "CampaignStatusEnum": "apps.campaigns.models.Campaign.Status",
        "AttemptStatusEnum": "apps.attempts.models.Attempt.Status",
        "AgentKindEnum": "apps.agents.models.AgentConfig.Kind",
        "ReviewStatusEnum": "apps.triage.models.AttemptReview.Status",
        "DiffKindEnum": "apps.api.views_attempts.DIFF_KINDS",
    },
}
