"""Pushing jobs: the sync and asyncio clients, payloads, bulk pushes, delivery to Redis
(reliable push, shards, replicas) and the sinks a push can be diverted to."""
