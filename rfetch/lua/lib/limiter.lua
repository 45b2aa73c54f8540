-- lib/limiter.lua: what every limiter script shares (included after "-- #include guard").
--
-- A limiter is ONE hash, KEYS[1] = "rfetch:limiter:<name>" (Redis Cluster safe: with a
-- "{tag}" namespace it sits in the namespace's slot), plus the registry set KEYS[2] =
-- "rfetch:limiters" that lists limiter names for the web UI, the CLI and the API.
-- Every limiter script takes the same first ARGV:
--   ARGV[1] name, ARGV[2] kind, ARGV[3] limit, ARGV[4] period (ms), ARGV[5] ttl (ms: the
--   hash expires after this long without a call), ARGV[6] wait budget (ms left of the
--   caller's wait_timeout), ARGV[7] ms the caller has already waited.
-- The clock is Redis's (TIME), so callers on hosts with skewed clocks share one window.

-- Redis time in milliseconds (float, microsecond precision).
local function limiter_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- nil, or the WRONGTYPE message naming the key of the wrong type (nothing is written then).
local function limiter_misfit()
  local w = wants_new()
  want(w, KEYS[1], 'hash')
  want(w, KEYS[2], 'set')
  return misfit(w)
end

-- The definition the caller holds (the newest deploy wins), the registry entry and the TTL.
local function limiter_touch(extra)
  redis.call('HSET', KEYS[1], 'kind', ARGV[2], 'limit', ARGV[3], 'period', ARGV[4], unpack(extra))
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end

-- Count the outcome of one attempt and build the reply {status, wait ms, used, now ms}.
-- status 1: granted (counted in "calls", and in "waited" / "wait_ms" when the caller
-- waited first); 0: refused, the caller may wait wait_ms and ask again; -1: refused and the
-- caller's wait budget cannot cover the wait: over the limit (counted in "overlimit").
local function limiter_reply(granted, wait_ms, used, now)
  local waited = tonumber(ARGV[7]) or 0
  if granted then
    redis.call('HINCRBY', KEYS[1], 'calls', 1)
    if waited > 0 then
      redis.call('HINCRBY', KEYS[1], 'waited', 1)
      redis.call('HINCRBY', KEYS[1], 'wait_ms', math.floor(waited))
    end
    return {1, 0, used, tostring(now)}
  end
  local budget = tonumber(ARGV[6]) or 0
  if wait_ms > budget then
    redis.call('HINCRBY', KEYS[1], 'overlimit', 1)
    return {-1, math.ceil(wait_ms), used, tostring(now)}
  end
  return {0, math.ceil(wait_ms), used, tostring(now)}
end
