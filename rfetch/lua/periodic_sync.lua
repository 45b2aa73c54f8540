-- periodic_sync.lua: a new leader writes its periodic schedules for the API and the web UI,
-- reads where each one stands, and removes the schedules it no longer has.
--
-- KEYS[1]: the leader hash "rfetch:leader".
-- KEYS[2]: the index hash "rfetch:periodic": schedule name -> definition (JSON).
-- KEYS[2 + i], i = 1..n: the state hash "rfetch:periodic:<name>" of the i-th schedule
--          registered by this leader (fields cursor, fingerprint, paused, last_tick, last_jid,
--          last_pushed_at, pushed, caught_up, skipped, ...).
-- KEYS[2 + n + j]: the state hash of the j-th schedule to remove.
-- ARGV[1]: the leader's token.
-- ARGV[2]: n.
-- ARGV[3 + 3(i-1)], ARGV[4 + 3(i-1)], ARGV[5 + 3(i-1)]: name, definition JSON and fingerprint
--          of the i-th schedule.
-- ARGV[2 + 3n + j]: the name of the j-th schedule to remove.
--
-- The cursor is the last tick dealt with (epoch seconds). A schedule seen for the first
-- time, or whose fingerprint (expression and time zone) changed, starts at Redis's clock:
-- its next tick is the first one after now, and the old version's ticks are not caught up.
-- Returns the n cursors in order (strings), or nil when the token does not hold the lease.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return nil
end
local now = redis.call('TIME')[1]
local n = tonumber(ARGV[2])
local cursors = {}
for i = 1, n do
  local a = 3 + 3 * (i - 1)
  local state = KEYS[2 + i]
  redis.call('HSET', KEYS[2], ARGV[a], ARGV[a + 1])
  local cursor = redis.call('HGET', state, 'cursor')
  if not cursor or redis.call('HGET', state, 'fingerprint') ~= ARGV[a + 2] then
    cursor = now
    redis.call('HSET', state, 'cursor', cursor, 'fingerprint', ARGV[a + 2])
  end
  cursors[i] = cursor
end
for j = 1, #KEYS - 2 - n do
  redis.call('HDEL', KEYS[2], ARGV[2 + 3 * n + j])
  redis.call('DEL', KEYS[2 + n + j])
end
return cursors
