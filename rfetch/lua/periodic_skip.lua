-- periodic_skip.lua: count ticks of one periodic schedule that are older than its catch-up
-- window (or that could not be pushed) and move its cursor past them, so that they are
-- seen on the API and the web UI instead of vanishing.
--
-- KEYS[1]: the leader hash "rfetch:leader".
-- KEYS[2]: the schedule's state hash "rfetch:periodic:<name>" (see periodic_sync.lua).
-- ARGV[1]: the leader's token.
-- ARGV[2]: the newest tick skipped (whole epoch seconds): the new cursor.
-- ARGV[3]: how many ticks are skipped (0 moves the cursor without counting, e.g. a push
--          that client middleware stopped).
--
-- Returns 'skipped', 'done' (the cursor is already there: another call counted them) or
-- 'lost' (the token does not hold the lease).
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 'lost'
end
local cursor = tonumber(redis.call('HGET', KEYS[2], 'cursor') or '')
if cursor and tonumber(ARGV[2]) <= cursor then
  return 'done'
end
redis.call('HSET', KEYS[2], 'cursor', ARGV[2])
if tonumber(ARGV[3]) > 0 then
  redis.call('HINCRBY', KEYS[2], 'skipped', ARGV[3])
  redis.call('HSET', KEYS[2], 'last_skipped_tick', ARGV[2])
end
return 'skipped'
