-- abandon.lua: the end of a job that will never run, taken out of its queue or set by a
-- cancel (rfetch.api.cancel): outcome "cancelled", or "died" when it was moved to the dead
-- set (lib/outcome.lua): its record, if it has store_result, its death in its batch (the
-- batch's death and complete callbacks fire as for any death), and the jobs waiting on it
-- settled as its death settles them. Called by
-- rfetch.store.workflow_commands.WorkflowCommands.abandon only, after the job was removed
-- (its ordering key and unique lock were released by that removal).
--
-- KEYS[1]: the namespace prefix P ("" or "<ns>:"), from which the record's keys and those of
--          lib/workflow.lua are derived (lib/keys.lua).
-- ARGV[1]: the job's record (lib/record.lua): jid, ttl (its store_result, if any), class,
--          bid (if batched).
-- ARGV[2]: the outcome: "cancelled", or "died" (it was put in the dead set).
-- ARGV[3]: the reason.
-- ARGV[4]: the failure's JSON {"error_class", "error_message"} for the batch ("" none).
-- Derived keys: "rfetch:waiting", "dead", "queues", "rfetch:dependents:<jid>",
--          "rfetch:result:<jid>", "rfetch:result-wake:<jid>" and those of lib/workflow.lua;
--          a batch's keys, its parents' and a callback's queue (lib/batch.lua).
-- Every key the release may write is checked first (lib/guard.lua).
-- Returns the number of waiting jobs settled.
-- #include outcome
local P, outcome = KEYS[1], ARGV[2]
local e, unknown = outcome_effects(outcome)
if unknown then return redis.error_reply(unknown) end
local rec = record_of(P, ARGV[1])
if not rec.jid then return redis.error_reply('ERR abandon: the record has no jid') end
local W = wf_keys(P)
local w = wants_new()
want(w, W.waiting, 'hash')
want(w, W.dead, 'zset')
want(w, W.queues, 'set')
want(w, key_of(P, 'dependents', rec.jid), 'hash')
job_end_wants(w, rec, outcome, {result = true})
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local now = wf_now()
local reason = 'cancelled' .. (ARGV[3] ~= '' and (': ' .. ARGV[3]) or '')
local ttl = tonumber(rec.ttl)
local fields = nil
if ttl and ttl > 0 then
  fields = {'status', e.result, 'error_class', 'rfetch.JobCancelled', 'error_message', reason,
    'finished_at', string.format('%.6f', now), 'class', rec.class or ''}
end
return job_end(rec, outcome, '', {failure = ARGV[4], result = fields, why = 'was ' .. reason,
  now = now, release = true})
