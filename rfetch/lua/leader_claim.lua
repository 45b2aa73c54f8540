-- leader_claim.lua: take the leadership if nobody holds it, or keep it (renew) if this
-- process holds it (Sidekiq Enterprise's leader election, with a token and Redis's clock).
--
-- KEYS[1]: the leader hash "rfetch:leader" (fields token, identity, since, renewed_at),
--          which expires when its holder stops renewing it.
-- KEYS[2]: the counter "rfetch:leader-changes", incremented at each election.
-- KEYS[3]: the wake list "rfetch:leader-wake" (leader_resign.lua), emptied at each election.
-- ARGV[1]: this process's token ("<identity>#<random hex>", new at every start).
-- ARGV[2]: the lease length in milliseconds, counted by Redis (PEXPIRE).
-- ARGV[3]: this process's identity (shown by the API and the web UI).
--
-- Returns {status, holder's identity, holder's remaining lease in ms, TIME seconds,
-- TIME microseconds}; status is 2 when this call elected this process, 1 when it renewed
-- this process's lease, 0 when another process leads. TIME lets the caller follow Redis's
-- clock between calls.
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local holder = redis.call('HGET', KEYS[1], 'token')
if holder == ARGV[1] then
  redis.call('HSET', KEYS[1], 'renewed_at', now)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, ARGV[3], tonumber(ARGV[2]), t[1], t[2]}
end
if not holder then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'identity', ARGV[3], 'since', now,
    'renewed_at', now)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('INCR', KEYS[2])
  redis.call('DEL', KEYS[3])
  return {2, ARGV[3], tonumber(ARGV[2]), t[1], t[2]}
end
local identity = redis.call('HGET', KEYS[1], 'identity') or ''
return {0, identity, redis.call('PTTL', KEYS[1]), t[1], t[2]}
