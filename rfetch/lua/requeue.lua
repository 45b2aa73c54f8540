-- requeue.lua: push fetched jobs back to the head of their public queue.
--
-- KEYS[1]: private list "queue:sq|<identity>|<q>" the jobs were fetched into.
-- KEYS[2]: public queue "queue:<q>".
-- KEYS[3]: the "queues" set.
-- ARGV[1]: the queue name <q> (re-added to "queues": Sidekiq #4706).
-- ARGV[2..]: raw payloads, in the order they should run next (ARGV[2] runs first).
--
-- A job is pushed back only if it is still in the private list (LREM removed it), so a job
-- that was acknowledged, or moved to the retry or dead set, meanwhile is never pushed back
-- as well (Sidekiq #4112). RPUSH puts it at the right end: next to run (Sidekiq's
-- bulk_requeue). Returns the number of jobs pushed back.
local pushed = 0
for i = #ARGV, 2, -1 do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i])
    pushed = pushed + 1
  end
end
if pushed > 0 then
  redis.call('SADD', KEYS[3], ARGV[1])
end
return pushed
