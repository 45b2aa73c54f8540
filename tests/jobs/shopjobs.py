"""Jobs of an imaginary shop, for the web UI's screenshots (``scripts/screenshots``): they
take a little time and sometimes fail, so the dashboard has something to show."""

from __future__ import annotations

import random
import time
from typing import Any

import rfetch


class _ShopJob(rfetch.Job):
    seconds = (0.01, 0.2)
    failure_rate = 0.0
    error: type[Exception] = RuntimeError
    message = "failed"
    retry = 3

    def perform(self, *args: Any) -> None:
        time.sleep(random.uniform(*self.seconds))
        if random.random() < self.failure_rate:
            raise self.error(self.message)


class SendWelcomeEmail(_ShopJob):
    name = "shop.mail.SendWelcomeEmail"
    queue = "mail"
    failure_rate = 0.08
    error = TimeoutError
    message = "SMTP server smtp.example.com did not answer within 10 s"


class ResizeProductImage(_ShopJob):
    name = "shop.images.ResizeProductImage"
    seconds = (0.05, 0.6)


class ChargeCard(_ShopJob):
    name = "shop.billing.ChargeCard"
    queue = "critical"
    failure_rate = 0.04
    error = ConnectionError
    message = "payment gateway answered 503 Service Unavailable"


class SyncInventory(_ShopJob):
    name = "shop.inventory.SyncInventory"
    seconds = (0.2, 1.5)


class GenerateInvoicePdf(_ShopJob):
    name = "shop.billing.GenerateInvoicePdf"
    queue = "reports"
    seconds = (0.3, 2.0)
