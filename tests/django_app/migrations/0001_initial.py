from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="Signup",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("email", models.CharField(max_length=200)),
                ("welcomed", models.BooleanField(default=False)),
            ],
        ),
        migrations.CreateModel(
            name="BackendRun",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("label", models.CharField(max_length=50)),
                ("pid", models.IntegerField()),
                ("jid", models.CharField(max_length=24)),
            ],
        ),
    ]
