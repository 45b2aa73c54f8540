-- requeue.lua: push fetched jobs back to the head of their public queue.
--
-- KEYS[1]: private list "queue:sq|<identity>|<q>" the jobs were fetched into.
-- KEYS[2]: public queue "queue:<q>".
-- KEYS[3]: the "queues" set.
-- ARGV[1]: the queue name <q> (re-added to "queues": Sidekiq #4706).
-- ARGV[2]: namespace prefix P ("" or "<ns>:"), for the key gate (lib/gate.lua).
-- ARGV[3..]: raw payloads, in the order they should run next (ARGV[3] runs first).
--
-- A job is pushed back only if it is still in the private list (LREM removed it), so a job
-- that was acknowledged, or moved to the retry or dead set, meanwhile is never pushed back
-- as well (Sidekiq #4112). RPUSH puts it at the right end: next to run (Sidekiq's
-- bulk_requeue). A job with an ordering key goes back by the gate's push-back rule
-- (gate_push_back: the holder to the head of the queue, a job not holding its key to the
-- head of the key's list), so order per key is kept; a tenant job to the head of its
-- tenant's list. Returns the number of jobs pushed back.
-- #include gate
local pushed = 0
for i = #ARGV, 3, -1 do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    if not gate_push_back(ARGV[2], ARGV[1], ARGV[i]) then
      redis.call('RPUSH', KEYS[2], ARGV[i])
    end
    pushed = pushed + 1
  end
end
if pushed > 0 then
  redis.call('SADD', KEYS[3], ARGV[1])
end
return pushed
