"""The outbox table ``rfetch_outbox`` (docs/outbox.md), created with the SQL of the
database's dialect (:mod:`rfetch.outbox.dialects`), also where ``RFETCH["outbox"]`` is off
(an empty table costs nothing and turning the outbox on later needs no migration)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

from rfetch.outbox.dialects import dialect


def create(apps: Any, schema_editor: Any) -> None:
    for statement in dialect(schema_editor.connection.vendor).create:
        schema_editor.execute(statement, params=None)


def drop(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute("DROP TABLE IF EXISTS rfetch_outbox", params=None)


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [migrations.RunPython(create, drop)]
