-- limiter_window.lua: one call of a fixed-window limiter (rfetch.Limiter.window): at most
-- <limit> grants per window of <period> ms, windows aligned on Redis's clock
-- (floor(TIME / period)), as Sidekiq Enterprise's bucket limiter aligns on the second,
-- minute, hour or day. Called by rfetch.store.limiter_commands.LimiterCommands.window only.
--
-- KEYS[1]: the limiter hash "rfetch:limiter:<name>" (fields: kind, limit, period, w = the
--          current window's number, n = grants in it, counters calls, waited, wait_ms,
--          overlimit).
-- KEYS[2]: the registry set "rfetch:limiters" (the limiter's name is added).
-- ARGV[1..7]: as in lib/limiter.lua (name, kind, limit, period ms, ttl ms, wait budget ms,
--          ms already waited).
--
-- Returns {status, wait ms, grants in the current window, Redis time ms} (lib/limiter.lua);
-- a refused call waits until the next window begins. A key of the wrong type is an error
-- reply naming it, and nothing is written.
-- #include guard
-- #include limiter
local bad = limiter_misfit()
if bad then return redis.error_reply(bad) end
local limit, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = limiter_now()
local window = math.floor(now / period)
local state = redis.call('HMGET', KEYS[1], 'w', 'n')
local used = 0
if tonumber(state[1]) == window then used = tonumber(state[2]) or 0 end
if used < limit then
  limiter_touch({'w', window, 'n', used + 1})
  return limiter_reply(true, 0, used + 1, now)
end
limiter_touch({'w', window, 'n', used})
return limiter_reply(false, (window + 1) * period - now, used, now)
