-- requeue.lua: push fetched jobs back to the head of their public queue (outcome
-- "pushed_back", lib/outcome.lua). Called by rfetch.store.commands.Commands.requeue only.
--
-- KEYS[1]: private list "queue:sq|<identity>|<q>" the jobs were fetched into.
-- KEYS[2]: the namespace prefix P ("" or "<ns>:"), from which the gate's and the records'
--          keys are derived (lib/keys.lua).
-- ARGV[1]: the queue name <q> (re-added to "queues": Sidekiq #4706).
-- ARGV[2]: N, the number of jobs.
-- ARGV[3..]: N records of two values, in the order the jobs should run next (the first
--          runs first): the raw payload, and its record (lib/record.lua: jid, key, tenant,
--          ck, ...; "" for a plain job).
-- Derived keys: "queue:<q>", "queues" and the gate's keys of <q> (lib/gate.lua), the
--          records' (lib/record.lua), a tenant's list, a concurrency key's waiting list.
--
-- A capped job gives its slot back and goes to the head of its key's waiting list.
-- A job is pushed back only if it is still in the private list (LREM removed it), so a job
-- that was acknowledged, or moved to the retry or dead set, meanwhile is never pushed back
-- as well (Sidekiq #4112). RPUSH puts it at the right end: next to run (Sidekiq's
-- bulk_requeue). A job with an ordering key goes back by the gate's push-back rule
-- (gate_push_back: the holder to the head of the queue, a job not holding its key to the
-- head of the key's list), so order per key is kept; a tenant job to the head of its
-- tenant's list; a job with a priority (its record's prio) to its queue's priority set,
-- first of its priority (lib/priority.lua). Before a job is taken out of the private list, every key its push-back may
-- write is checked (lib/guard.lua): a job with a key of another type on its way stays in the
-- private list, and the others go on.
-- Returns {pushed, {position, message, ...}}: the number of jobs pushed back, and for each
-- job left in the private list its record's position (1-based) and the WRONGTYPE message.
-- #include outcome
local P, q = KEYS[2], ARGV[1]
local pushed = 0
local left = {}
for r = tonumber(ARGV[2]), 1, -1 do
  local at = 3 + 2 * (r - 1)
  local raw = ARGV[at]
  local rec = record_of(P, ARGV[at + 1], q)
  local w = wants_new()
  want(w, KEYS[1], 'list')
  job_end_wants(w, rec, 'pushed_back')
  local bad = misfit(w)
  if bad then
    left[#left + 1] = r
    left[#left + 1] = bad
  elseif redis.call('LREM', KEYS[1], 1, raw) == 1 then
    job_end(rec, 'pushed_back', raw)
    pushed = pushed + 1
  end
end
if pushed > 0 then
  redis.call('SADD', key_of(P, 'queues'), q)
end
return {pushed, left}
