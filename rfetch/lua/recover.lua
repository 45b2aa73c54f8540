-- recover.lua: push one job of a dead process back to its public queue, counting
-- recoveries per jid to catch poison pills (Sidekiq Pro 5.2).
--
-- KEYS[1]: the dead process's private list "queue:sq|<identity>|<q>".
-- KEYS[2]: public queue "queue:<q>".
-- KEYS[3]: the "queues" set.
-- KEYS[4]: recovery counter of the job's jid "rfetch:recoveries:<jid>".
-- ARGV[1]: the raw payload (exact bytes in the private list).
-- ARGV[2]: the queue name <q>.
-- ARGV[3]: recoveries that make a poison pill (3): this recovery is number count + 1.
-- ARGV[4]: the counting window in seconds (72 h); starts at the first recovery.
-- ARGV[5] (optional): namespace prefix P; a job with an ordering key then goes back by the
--          gate's push-back rule (lib/gate.lua) instead of a plain RPUSH, and a tenant
--          job goes back to the head of its tenant's list.
--
-- Returns "poison" (nothing changed: the caller moves the job to the dead set with
-- settle.lua, atomically), "gone" (no longer in the private list), or "requeued" (removed
-- from the private list, RPUSHed to the head of the queue so it runs next, queue re-added to
-- "queues" (Sidekiq #4706), counter incremented) - all in one atomic step.
-- #include gate
local count = tonumber(redis.call('GET', KEYS[4]) or '0')
if count + 1 >= tonumber(ARGV[3]) then
  return 'poison'
end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 'gone'
end
if not (ARGV[5] and gate_push_back(ARGV[5], ARGV[2], ARGV[1])) then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[2])
end
if redis.call('INCR', KEYS[4]) == 1 then
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[4]))
end
return 'requeued'
