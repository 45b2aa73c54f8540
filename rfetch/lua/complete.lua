-- complete.lua: the end of a job whose outcome is recorded (store_result): its
-- acknowledgement (success), or its death (the dead set, or discarded), together with its
-- record, the wake token of rfetch.result, and the release of the jobs waiting on it, in one
-- atomic step: a record exists exactly when the job was acknowledged or buried. Called by
-- rfetch.store.workflow_commands.WorkflowCommands.complete only.
--
-- KEYS[1]: the private list "queue:sq|<identity>|<q>" holding the job.
-- KEYS[2]: the namespace prefix P ("" or "<ns>:"), from which the record's keys and those of
--          lib/workflow.lua are derived (lib/keys.lua).
-- ARGV[1]: the raw payload as fetched (what LREM matches).
-- ARGV[2]: the job's record (lib/record.lua); its jid, ttl (seconds to keep the record: the
--          job's store_result) and class are required here.
-- ARGV[3]: the outcome (lib/outcome.lua): "succeeded", or a death: "died", "discarded",
--          "expired", "cancelled"; the record's status is the outcome's (lib/outcome.lua's
--          result).
-- ARGV[4]: the return value as JSON text ("" for a death).
-- ARGV[5], ARGV[6]: error class and message of a death ("" for a success).
-- ARGV[7]: the payload to store in the dead set ("" for none: a success, or a death whose
--          payload says "dead": false, which is discarded).
-- ARGV[8], ARGV[9]: dead set trim (drop entries scored below, float epoch s) and cap.
-- ARGV[10]: the failure's JSON {"error_class", "error_message"} for a batch ("" none).
-- Derived keys: the record's (lib/record.lua); "dead", "rfetch:result:<jid>",
--          "rfetch:result-wake:<jid>", "rfetch:dependents:<jid>" and those of
--          lib/workflow.lua, for the jobs waiting on this one; those of lib/batch.lua.
--
-- The keys it may write are checked first (lib/guard.lua), the numbers too: the dead set for
-- a death, the keys of the release only when jobs wait on this one (one EXISTS), the gate's;
-- the private list needs none (LREM, the first write, fails on another type), the record
-- and wake list are replaced whatever they held, and the counters are advisory. A misfit
-- changes nothing and is an error reply, so the job stays in its private list. Only if the
-- LREM removed the job (it was not pushed back or settled meanwhile) is anything written.
-- Several calls go in one pipeline (worker/outcome.py), each atomic.
-- Returns {removed (1/0), jobs released from waiting}.
-- #include outcome
local P, outcome, dead_text = KEYS[2], ARGV[3], ARGV[7]
local e, unknown = outcome_effects(outcome)
if unknown then return redis.error_reply(unknown) end
local rec = record_of(P, ARGV[2])
local dead = key_of(P, 'dead')
local w = wants_new()
if dead_text ~= '' then want(w, dead, 'zset') end
job_end_wants(w, rec, outcome, {result = true})
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local ttl = finite(rec.ttl)
if not ttl or ttl <= 0 or not rec.jid or (ARGV[8] ~= '' and not finite(ARGV[8]))
    or (ARGV[9] ~= '' and not finite(ARGV[9])) then
  return redis.error_reply('ERR complete: ttl ' .. tostring(rec.ttl) .. ', trim ' .. ARGV[8] ..
    ' or cap ' .. ARGV[9] .. ' is not a number, or no jid: nothing was changed')
end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return {0, 0}
end
local now = wf_now()
if dead_text ~= '' then
  redis.call('ZADD', dead, now, dead_text)
  if ARGV[8] ~= '' then redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. ARGV[8]) end
  if ARGV[9] ~= '' then redis.call('ZREMRANGEBYRANK', dead, 0, -(tonumber(ARGV[9]) + 1)) end
end
local fields = {'status', e.result, 'finished_at', string.format('%.6f', now),
  'class', rec.class or ''}
local why = ''
if e.result == 'succeeded' then
  fields[#fields + 1] = 'result'
  fields[#fields + 1] = ARGV[4]
else
  for _, f in ipairs({'error_class', ARGV[5], 'error_message', ARGV[6]}) do
    fields[#fields + 1] = f
  end
  why = 'died (' .. ARGV[5] .. ': ' .. ARGV[6] .. ')'
end
local released = job_end(rec, outcome, ARGV[1],
  {failure = ARGV[10], result = fields, why = why, now = now})
return {1, released}
