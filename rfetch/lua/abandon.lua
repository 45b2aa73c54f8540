-- abandon.lua: the end of a job that will never run, taken out of its queue or set by a
-- cancel (rfetch.api.cancel): its record, if it has store_result ("cancelled", or "dead"
-- when it was moved to the dead set), its death in its batch (the batch's death and complete
-- callbacks fire as for any death), and the jobs waiting on it settled as its death
-- settles them. Called by rfetch.store.workflow_commands.WorkflowCommands.abandon only,
-- after the job was removed.
--
-- KEYS[1]: the namespace prefix P ("" or "<ns>:"), for lib/workflow.lua's derived keys.
-- KEYS[2]: the index of waiting jobs "rfetch:waiting".
-- KEYS[3]: the dead set "dead".
-- KEYS[4]: the "queues" set.
-- KEYS[5]: the counter "rfetch:deps-cancelled".
-- KEYS[6]: the counter "rfetch:results-stored".
-- KEYS[7]: the jobs waiting on it "rfetch:dependents:<jid>".
-- KEYS[8], KEYS[9]: its record "rfetch:result:<jid>" and wake list
--          "rfetch:result-wake:<jid>".
-- KEYS[10] (a batched job only): its batch hash "b-<bid>", which counts its death.
-- ARGV[1]: jid. ARGV[2]: its store_result in seconds ("" for none). ARGV[3]: "cancelled" or
--          "dead". ARGV[4]: the reason. ARGV[5]: its class name. ARGV[6] (with KEYS[10]):
--          the failure's JSON {"error_class", "error_message"} for the batch.
-- Derived keys: those of lib/workflow.lua; a batch's other keys, its parents' and a
--          callback's queue (lib/batch.lua).
-- Every key the release may write is checked first (lib/guard.lua).
-- Returns the number of waiting jobs settled.
-- #include guard
-- #include gate
-- #include cap
-- #include workflow
-- #include batch
local W = {P = KEYS[1], waiting = KEYS[2], dead = KEYS[3], queues = KEYS[4],
           cancelled = KEYS[5], stored = KEYS[6]}
local w = wants_new()
want(w, W.waiting, 'hash')
want(w, W.dead, 'zset')
want(w, W.queues, 'set')
want(w, KEYS[7], 'hash')
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local now = wf_now()
local reason = 'cancelled' .. (ARGV[4] ~= '' and (': ' .. ARGV[4]) or '')
local ttl = tonumber(ARGV[2])
if ttl and ttl > 0 then
  wf_record(W, ARGV[1], ttl, {'status', ARGV[3], 'error_class', 'rfetch.JobCancelled',
    'error_message', reason, 'finished_at', string.format('%.6f', now), 'class', ARGV[5]})
end
if KEYS[10] then batch_event(W.P, KEYS[10], ARGV[1], 'dead', ARGV[6]) end
if redis.call('EXISTS', KEYS[7]) == 0 then return 0 end
return wf_release(W, ARGV[1], ARGV[3], 'was ' .. reason, now)
