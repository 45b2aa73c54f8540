"""Settings of the Django project the Django integration is tested in (PostgreSQL on
127.0.0.1:5432, trust auth; the database name comes from ``RFETCH_DJANGO_DB``)."""

from __future__ import annotations

import importlib.util
import os

import django

SECRET_KEY = "rfetch-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "rfetch.integrations.django",
    "tests.django_app",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "tests.django_app.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("RFETCH_DJANGO_DB", "rfetch_django"),
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": "5432",
        # Persistent connections, checked before first use after each job (the worker's
        # CloseOldConnections arms the check), as a production setup would have them.
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": True,
    }
}

RFETCH = {
    "redis_url": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"),
    "queues": ["django"],
    "web": {"title": "Jobs"},
}

# Django's task framework on rfetch: django.tasks (Django 6+) or the django-tasks package.
TASKS = {
    "default": {
        "BACKEND": "rfetch.integrations.django.RfetchBackend",
        "QUEUES": ["django"],
        "OPTIONS": {"result_ttl": 3600},
    }
}
if django.VERSION < (6, 0) and importlib.util.find_spec("django_tasks") is not None:
    INSTALLED_APPS.append("django_tasks")
