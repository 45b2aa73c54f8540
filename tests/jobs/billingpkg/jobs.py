"""The job of :mod:`billingpkg`, registered as ``billingpkg.jobs.Invoice``."""

from __future__ import annotations

import rfetch


class Invoice(rfetch.Job):
    def perform(self, order_id: int) -> None:
        print(f"invoiced {order_id}")
