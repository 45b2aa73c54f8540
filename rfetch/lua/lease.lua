-- lease.lua: set or renew the leases of running keyed jobs (issue #5): a worker sets one
-- when it starts a keyed job, its heartbeat renews them, and stuck-key rescue
-- (rescue.lua) only looks at keys whose lease has expired.
--
-- KEYS[i]: the lease sorted set "rfetch:key-leases:<q>" of the i-th key.
-- ARGV[1]: lease length in seconds (added to Redis TIME).
-- ARGV[2]: "start" (ZADD: set) or "renew" (ZADD XX: never brings back a lease that a
--          finish, settle or push-back removed).
-- ARGV[2 + i]: the i-th ordering key.
-- Returns the number of leases written.
local t = redis.call('TIME')
local expiry = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
local written = 0
for i = 1, #KEYS do
  if ARGV[2] == 'renew' then
    written = written + redis.call('ZADD', KEYS[i], 'XX', 'CH', expiry, ARGV[2 + i])
  else
    redis.call('ZADD', KEYS[i], expiry, ARGV[2 + i])
    written = written + 1
  end
end
return written
