-- leader_resign.lua: give the leadership up at once (quiet, TERM), so that another process
-- takes over within moments instead of when the lease runs out (Sidekiq Enterprise's
-- leaders "step down" when they exit).
--
-- KEYS[1]: the leader hash "rfetch:leader".
-- KEYS[2]: the wake list "rfetch:leader-wake": one element wakes one follower blocked on it
--          (BLPOP), which then claims the leadership (leader_claim.lua).
-- ARGV[1]: the token of the process stepping down.
-- ARGV[2]: milliseconds the wake element is kept when no follower is waiting.
--
-- Only the holder of the token can step down: returns 1 when the lease was given up, 0 when
-- this token did not hold it (it had already run out or been taken).
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
