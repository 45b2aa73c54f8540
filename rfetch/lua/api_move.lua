-- api_move.lua: move one job out of a sorted set (schedule, retry or dead) for an admin
-- action of rfetch.api: "retry now" / "add to queue" (to its queue) or "kill" (to the dead
-- set). The removal and the write are one atomic step, and the write happens only if this
-- call removed the entry: a job the poller (or another admin) moved meanwhile is not pushed
-- twice.
--
-- KEYS[1]: the source sorted set.
-- KEYS[2]: the destination: the public queue "queue:<q>" (mode "queue") or the dead set
--          (mode "dead").
-- KEYS[3]: the "queues" set (mode "queue"; SADD as every push does).
-- ARGV[1]: mode: "queue" or "dead".
-- ARGV[2]: the entry exactly as stored (what ZREM must match).
-- ARGV[3]: the payload to write (for "queue", with a fresh enqueued_at).
-- ARGV[4]: mode "queue": the queue name <q>; mode "dead": the score (time of death, float
--          epoch seconds).
-- ARGV[5]: mode "dead": trim entries scored below this (now - dead_timeout); "" for none.
-- ARGV[6]: mode "dead": the most entries to keep (dead_max_jobs); "" for no cap. The same
--          trimming as settle.lua.
-- Returns 1 if moved, 0 if the entry was no longer in the source set.
if redis.call('ZREM', KEYS[1], ARGV[2]) == 0 then
  return 0
end
if ARGV[1] == 'queue' then
  redis.call('LPUSH', KEYS[2], ARGV[3])
  redis.call('SADD', KEYS[3], ARGV[4])
else
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
  if ARGV[5] ~= '' then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[5])
  end
  if ARGV[6] ~= '' then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[6]) + 1))
  end
end
return 1
