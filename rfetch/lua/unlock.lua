-- unlock.lua: release a lock only if we still hold it.
--
-- KEYS[1]: the lock key (e.g. "rfetch:lock:recovery").
-- ARGV[1]: the holder's token (the process identity).
-- Returns 1 if released, 0 if the lock had expired or another process holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
