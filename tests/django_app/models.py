"""Rows the test jobs read and write."""

from __future__ import annotations

from django.db import models


class Signup(models.Model):
    email = models.CharField(max_length=200)
    welcomed = models.BooleanField(default=False)


class BackendRun(models.Model):
    """One run of RecordBackend: which PostgreSQL backend (connection) served it."""

    label = models.CharField(max_length=50)
    pid = models.IntegerField()
    jid = models.CharField(max_length=24)
