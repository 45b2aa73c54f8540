-- recover.lua: push one job of a dead process back to its public queue (outcome
-- "recovered", lib/outcome.lua), counting recoveries per jid to catch poison pills
-- (Sidekiq Pro 5.2). A live worker pushes back the same way, counted with the same counter,
-- a job on which rfetch itself failed.
-- Called by rfetch.store.commands.Commands.recover only.
--
-- KEYS[1]: the private list "queue:sq|<identity>|<q>" (of a dead process, or the caller's).
-- KEYS[2]: recovery counter of the job's jid "rfetch:recoveries:<jid>".
-- KEYS[3]: the namespace prefix P ("" or "<ns>:"), from which the gate's and the record's
--          keys are derived (lib/keys.lua).
-- ARGV[1]: the raw payload (exact bytes in the private list).
-- ARGV[2]: the queue name <q>.
-- ARGV[3]: recoveries that make a poison pill (3): this recovery is number count + 1;
--          0: not counted (a job its dead process held but had not started): pushed back
--          without reading or incrementing the counter.
-- ARGV[4]: the counting window in seconds (72 h); starts at the first recovery.
-- ARGV[5]: the job's record (lib/record.lua: jid, key, tenant, ck, ...; "" for a plain
--          job): a keyed job goes back by the gate's push-back rule, a tenant job to the
--          head of its tenant's list, a capped one gives its slot back (this is when a
--          SIGKILLed holder's slot comes back) and goes to the head of its key's list, a
--          job with a priority (prio) to its queue's priority set, first of its priority.
-- Derived keys: "queue:<q>", "queues" and the gate's keys of <q> (lib/gate.lua), the
--          record's (lib/record.lua), a tenant's list, a concurrency key's waiting list.
--
-- Returns "poison" (nothing changed: the caller moves the job to the dead set with
-- settle.lua, atomically), "gone" (no longer in the private list), or "requeued" (removed
-- from the private list, RPUSHed to the head of the queue so it runs next, queue re-added to
-- "queues" (Sidekiq #4706), counter incremented when counted) - all in one atomic step.
-- Every key written is checked first (lib/guard.lua): one of another type, or a counter
-- that is not an integer, changes nothing and is an error reply, so the job stays in the
-- private list.
-- #include outcome
local counted = tonumber(ARGV[3]) > 0
if counted then
  local raw_count = redis.call('GET', KEYS[2])
  local count = 0
  if raw_count then
    count = tonumber(raw_count)
    if not count or not string.match(raw_count, '^%d+$') then
      return redis.error_reply('ERR ' .. KEYS[2] .. ' holds ' .. raw_count ..
        ', not a count: nothing was changed')
    end
  end
  if count + 1 >= tonumber(ARGV[3]) then
    return 'poison'
  end
end
local rec = record_of(KEYS[3], ARGV[5], ARGV[2])
local w = wants_new()
want(w, KEYS[1], 'list')
job_end_wants(w, rec, 'recovered')
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 'gone'
end
job_end(rec, 'recovered', ARGV[1])
if counted and redis.call('INCR', KEYS[2]) == 1 then
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
end
return 'requeued'
