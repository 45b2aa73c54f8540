"""``rfetch.sink``: kept for code written against the earlier docs;
the module is :mod:`rfetch.push.sink`."""

from rfetch.push.sink import INTERCEPTION as INTERCEPTION

__all__ = ["INTERCEPTION"]
