"""rfetch's storage layer: every key name (:mod:`.keys`), the Redis connection
(:mod:`.connection`) and one typed call per Lua script (:mod:`.commands`)."""
