-- limiter_concurrent.lua: the concurrent limiter (rfetch.Limiter.concurrent, Sidekiq
-- Enterprise's concurrent limiter): at most <limit> locks held at once. Called by
-- rfetch.store.limiter_commands.LimiterCommands.acquire / release / renew only.
--
-- Each lock is a field "l:<token>" of the limiter hash whose value is "<expiry ms> <holder>"
-- (expiry on Redis's clock). A lock whose expiry has passed belongs to a holder that stopped
-- renewing it (its process was killed or stopped for longer than lock_timeout): the next
-- acquire removes it (counted in "reclaimed"). A live holder renews its locks every
-- lock_timeout / 3 (rfetch/limiter/locks.py), so its lock never expires while it runs.
--
-- KEYS[1]: the limiter hash "rfetch:limiter:<name>" (fields: kind, limit, period (0),
--          lock_timeout, l:<token> per lock, counters calls, waited, wait_ms, overlimit,
--          reclaimed).
-- KEYS[2]: the registry set "rfetch:limiters" (the limiter's name is added).
-- ARGV[1..7]: as in lib/limiter.lua (name, kind, limit, period ms (0), ttl ms, wait budget
--          ms, ms already waited).
-- ARGV[8]: operation: "acquire", "release" or "renew".
-- ARGV[9]: lock_timeout, ms (acquire and renew: the lock expires this long after now).
-- ARGV[10]: the holder's description (acquire), e.g. "host:pid:thread".
-- ARGV[11..]: the lock tokens (acquire: one new token; release: one; renew: every lock
--          this process holds on this limiter).
--
-- Returns, for acquire: {status, wait ms, locks held after this call, Redis time ms}
-- (lib/limiter.lua; wait ms: until the earliest lock expires, the caller polls sooner);
-- for release: 1 if the lock was held, 0 if it had already been reclaimed; for renew: the
-- tokens no longer held (reclaimed while their holder was stopped). A key of the wrong type
-- is an error reply naming it; nothing is written.
-- #include guard
-- #include limiter
local bad = limiter_misfit()
if bad then return redis.error_reply(bad) end
local op, timeout = ARGV[8], tonumber(ARGV[9])
if op == 'release' then
  return redis.call('HDEL', KEYS[1], 'l:' .. ARGV[11])
end
local now = limiter_now()
if op == 'renew' then
  local lost = {}
  for i = 11, #ARGV do
    local field = 'l:' .. ARGV[i]
    local value = redis.call('HGET', KEYS[1], field)
    if value then
      local holder = string.match(value, '^%S+ (.*)$') or ''
      redis.call('HSET', KEYS[1], field, string.format('%.3f', now + timeout) .. ' ' .. holder)
    else
      lost[#lost + 1] = ARGV[i]
    end
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return lost
end
local limit = tonumber(ARGV[3])
local flat = redis.call('HGETALL', KEYS[1])
local held, earliest, expired = 0, nil, {}
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, 2) == 'l:' then
    local expiry = tonumber(string.match(flat[i + 1], '^(%S+)')) or 0
    if expiry <= now then
      expired[#expired + 1] = flat[i]
    else
      held = held + 1
      if earliest == nil or expiry < earliest then earliest = expiry end
    end
  end
end
if #expired > 0 then
  redis.call('HDEL', KEYS[1], unpack(expired))
  redis.call('HINCRBY', KEYS[1], 'reclaimed', #expired)
end
if held < limit then
  limiter_touch({'lock_timeout', ARGV[9],
    'l:' .. ARGV[11], string.format('%.3f', now + timeout) .. ' ' .. ARGV[10]})
  return limiter_reply(true, 0, held + 1, now)
end
limiter_touch({'lock_timeout', ARGV[9]})
-- A live holder may release long before its lock expires: the caller polls within its
-- budget, and only an exhausted budget is over the limit.
local budget = tonumber(ARGV[6]) or 0
local wait = earliest - now
if budget > 0 and wait > budget then wait = budget end
return limiter_reply(false, wait, held, now)
