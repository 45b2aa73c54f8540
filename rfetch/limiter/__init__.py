"""Limiters you call: ``rfetch.Limiter`` (see docs/flow-control.md)."""

from rfetch.limiter.core import Limiter
from rfetch.limiter.grant import Grant

__all__ = ["Grant", "Limiter"]
