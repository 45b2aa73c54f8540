"""``rfetch.shards``: kept for code written against the earlier docs;
the module is :mod:`rfetch.push.shards`."""

from rfetch.push.shards import shard_config as shard_config

__all__ = ["shard_config"]
