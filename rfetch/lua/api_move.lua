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
-- ARGV[1]: mode: "queue", "dead" or "delete".
-- ARGV[2]: the entry exactly as stored (what ZREM must match).
-- ARGV[3]: the payload to write (for "queue", with a fresh enqueued_at).
-- ARGV[4]: mode "queue": the queue name <q>; mode "dead": the score (time of death, float
--          epoch seconds).
-- ARGV[5]: mode "dead": trim entries scored below this (now - dead_timeout); "" for none.
-- ARGV[6]: mode "dead": the most entries to keep (dead_max_jobs); "" for no cap. The same
--          trimming as settle.lua.
-- ARGV[7] (optional): namespace prefix P: a job with an ordering key or a unique lock then
--          keeps the key gate consistent (lib/gate.lua, issue #5): mode "queue" dispatches
--          it through the gate (the blocked holder goes out; another keyed job waits its
--          turn), mode "dead" and mode "delete" (remove only) release its key and its unique
--          lock, so a key blocked by a failed job is unblocked by retrying or deleting it.
-- Returns 1 if moved, 0 if the entry was no longer in the source set.
-- #include gate
if redis.call('ZREM', KEYS[1], ARGV[2]) == 0 then
  return 0
end
local P = ARGV[7]
local k, jid, gq, unique, t = nil, nil, nil, nil, nil
if P then k, jid, gq, unique, t = gate_fields(ARGV[3]) end
if ARGV[1] ~= 'queue' and jid then
  if k and gq then gate_release(P, gq, k, jid) end
  if unique then unique_release(P, unique, jid) end
end
if ARGV[1] == 'delete' then
  return 1
end
if ARGV[1] == 'queue' then
  if k and jid and gq then
    gate_dispatch(P, gq, k, jid, ARGV[3], t)
  elseif t and gq then
    fair_send(P, gq, t, ARGV[3])
  else
    redis.call('LPUSH', KEYS[2], ARGV[3])
    redis.call('SADD', KEYS[3], ARGV[4])
  end
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
