-- lease.lua: write the leases of running keyed jobs (ordering keys). The heartbeat of the
-- process running them calls it (rfetch.store.commands.Commands.lease); stuck-key rescue
-- (rescue.lua) only looks at keys whose lease has expired.
--
-- KEYS[i]: the lease sorted set "rfetch:key-leases:<q>" of the i-th job.
-- ARGV[1]: lease length in seconds (added to Redis TIME).
-- ARGV[1 + i]: the i-th member, "<jid>:<ordering key>".
--
-- A lease written just after its job finished (the heartbeat raced the ack) is stale: the
-- member names a jid that no longer holds the key, and rescue.lua drops it without
-- releasing anything. A lease set of another type fails its ZADD after the leases before
-- it were written: no job moves here, and the heartbeat reports the error.
-- Returns the number of leases written.
local t = redis.call('TIME')
local expiry = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, ARGV[1 + i])
end
return #KEYS
