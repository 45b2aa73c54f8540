-- checkpoint.lua: write a durable job's checkpoint only while this process owns the job.
-- Called by rfetch.store.checkpoint_commands.CheckpointCommands only.
--
-- KEYS[1]: the private list "queue:sq|<identity>|<q>" the job was fetched into (the fence).
-- KEYS[2]: the hash to write: an iterable job's state "it-<jid>" (Sidekiq 7.3's fields
--          ex, c, rt, cancelled) or a job's step results "rfetch:steps:<jid>".
-- ARGV[1]: the job's payload exactly as fetched (what LPOS looks for in KEYS[1]).
-- ARGV[2]: "set" (HSET the pairs, then EXPIRE) or "del" (delete KEYS[2]: the job completed).
-- ARGV[3]: seconds to keep KEYS[2] after this write (Sidekiq's 30 days).
-- ARGV[4]: N, the number of field/value pairs to HSET.
-- ARGV[5..4+2N]: the pairs.
-- ARGV[5+2N..]: fields to HDEL in the same write (an iterable job's per-item step results
--          of finished items).
--
-- The fence: a process stalled past its heartbeat (SIGSTOP, a long GC, a VM pause) whose
-- job was recovered and fetched by another process no longer finds the exact payload in
-- its own private list, so it can never write an older cursor over the new owner's (the
-- race Sidekiq 7.3's unfenced flush has). Redis >= 6.0.6 (LPOS).
-- Returns {owned, cancelled}: owned 1 if written, 0 if refused (nothing changed);
-- cancelled the hash's "cancelled" field (epoch seconds as text) or false.
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return {0, false}
end
if ARGV[2] == "del" then
  redis.call("DEL", KEYS[2])
  return {1, false}
end
local n = tonumber(ARGV[4])
if n > 0 then
  local pairs = {}
  for i = 5, 4 + 2 * n do
    pairs[#pairs + 1] = ARGV[i]
  end
  redis.call("HSET", KEYS[2], unpack(pairs))
end
for i = 5 + 2 * n, #ARGV do
  redis.call("HDEL", KEYS[2], ARGV[i])
end
redis.call("EXPIRE", KEYS[2], tonumber(ARGV[3]))
return {1, redis.call("HGET", KEYS[2], "cancelled")}
