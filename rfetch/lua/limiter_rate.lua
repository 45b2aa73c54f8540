-- limiter_rate.lua: one call of a rate limiter with a continuous refill: the token bucket
-- (rfetch.Limiter.bucket), the leaky bucket (rfetch.Limiter.leaky) and the points limiter
-- (rfetch.Limiter.points, a token bucket whose calls cost a given number of points).
-- Called by rfetch.store.limiter_commands.LimiterCommands.rate only.
--
-- The three are one algorithm, GCRA (the generic cell rate algorithm): one unit flows out
-- every T = period / limit ms, the bucket holds <capacity> units, and the hash keeps only
-- "tat", the Redis time (ms) at which the bucket will be empty. A call of <cost> units is
-- granted when max(tat, now) + cost * T - now <= capacity * T; else it may ask again after
-- the difference. The token bucket and the points limiter hold <limit> units (a burst of
-- <limit>, then <limit> per period); the leaky bucket holds <burst> units (default 1: calls
-- spaced T apart, a smooth rate).
--
-- KEYS[1]: the limiter hash "rfetch:limiter:<name>" (fields: kind, limit, period, capacity,
--          tat, counters calls, waited, wait_ms, overlimit).
-- KEYS[2]: the registry set "rfetch:limiters" (the limiter's name is added).
-- ARGV[1..7]: as in lib/limiter.lua (name, kind, limit, period ms, ttl ms, wait budget ms,
--          ms already waited).
-- ARGV[8]: capacity, in units (a positive integer).
-- ARGV[9]: cost of this call, in units (1 <= cost <= capacity).
--
-- Returns {status, wait ms, units in the bucket after this call, Redis time ms}
-- (lib/limiter.lua). A key of the wrong type is an error reply naming it; nothing is written.
-- #include guard
-- #include limiter
local bad = limiter_misfit()
if bad then return redis.error_reply(bad) end
local limit, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local capacity, cost = tonumber(ARGV[8]), tonumber(ARGV[9])
local T = period / limit
local now = limiter_now()
local tat = tonumber(redis.call('HGET', KEYS[1], 'tat')) or now
if tat < now then tat = now end
local after = tat + cost * T
-- 1 microsecond of slack for the float sums of T.
if after - now <= capacity * T + 0.001 then
  limiter_touch({'capacity', capacity, 'tat', string.format('%.3f', after)})
  return limiter_reply(true, 0, math.ceil((after - now) / T - 0.001), now)
end
limiter_touch({'capacity', capacity})
return limiter_reply(false, after - now - capacity * T, math.ceil((tat - now) / T - 0.001), now)
