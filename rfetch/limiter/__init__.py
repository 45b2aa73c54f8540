"""Limiters you call: ``rfetch.Limiter`` (see docs/flow-control.md)."""

from rfetch.limiter.core import Grant, Limiter

__all__ = ["Grant", "Limiter"]
