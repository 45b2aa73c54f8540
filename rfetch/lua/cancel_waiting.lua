-- cancel_waiting.lua: cancel a job that waits on another one or on a batch (after=): take it
-- out of its dependency's dependents hash (or the batch's waiting list) and end it through lib/outcome.lua's waiter_give_up: outcome
-- "cancelled" (dropped, counted) or "died" (buried in the dead set, error class
-- rfetch.JobCancelled), its record written if it has store_result, and the jobs waiting on
-- it settled as its death settles them. Atomic with complete.lua's release: a job released
-- first is in its queue and is not found here. Called by
-- rfetch.store.workflow_commands.WorkflowCommands.cancel_waiting only.
--
-- KEYS[1]: the namespace prefix P ("" or "<ns>:"), from which the record's keys and those
--          of lib/workflow.lua are derived (lib/keys.lua).
-- KEYS[2]: the index of waiting jobs "rfetch:waiting".
-- KEYS[3]: the dead set "dead".
-- KEYS[4]: the "queues" set.
-- KEYS[5]: the counter "rfetch:deps-cancelled".
-- KEYS[6]: the counter "rfetch:results-stored".
-- ARGV[1]: the job's record (lib/record.lua: jid, after: the jid or bid it waits on).
-- ARGV[2]: the outcome: "cancelled" (dropped), or "died" (buried in the dead set).
-- ARGV[3]: the reason.
-- ARGV[4]: for a job waiting on a batch, its exact entry in the batch's waiting list (LREM
--          of it: not found when the batch released it meanwhile); "" for one waiting on a
--          job.
-- Derived keys: the dependents hash of its dependency "rfetch:dependents:<after>", or the
--          batch's waiting lists "b-<after>-waiting-success" and "-waiting-complete"; its
--          record "rfetch:result:<jid>" and wake list "rfetch:result-wake:<jid>", and those
--          of lib/workflow.lua and lib/outcome.lua. The rest of the ending record (ttl and
--          class: store_result) is read from the waiting payload (record_of_job).
-- Every key the end may write is checked first (lib/guard.lua): one of another type
-- changes nothing and is an error reply.
-- Returns {1 if cancelled (0: not waiting there), jobs settled behind it}.
-- #include outcome
local W = {P = KEYS[1], waiting = KEYS[2], dead = KEYS[3], queues = KEYS[4],
           cancelled = KEYS[5], stored = KEYS[6]}
local outcome = ARGV[2]
if outcome ~= 'cancelled' and outcome ~= 'died' then
  return redis.error_reply('ERR cancel_waiting: unknown outcome ' .. outcome ..
    ': nothing was changed')
end
local asked = record_of(W.P, ARGV[1])
if not asked.jid or not asked.after then
  return redis.error_reply('ERR cancel_waiting: the record has no jid or after')
end
local jid, dependents = asked.jid, key_of(W.P, 'dependents', asked.after)
local entry, lists = ARGV[4] or '', nil
local w = wants_new()
for i, kind in ipairs({'hash', 'zset', 'set', 'string', 'string'}) do
  want(w, KEYS[i + 1], kind)
end
if entry ~= '' then
  local bh = key_of(W.P, 'batch', asked.after)
  lists = {bh .. '-waiting-success', bh .. '-waiting-complete'}
  want(w, lists[1], 'list')
  want(w, lists[2], 'list')
else
  want(w, dependents, 'hash')
end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local text = entry
if not lists then
  text = redis.call('HGET', dependents, jid)
  if not text then return {0, 0} end
end
local ok, job = pcall(cjson.decode, text)
local rec = record_of_job(W.P, ok and type(job) == 'table' and job or {})
rec.jid = jid
w = wants_new()
job_end_wants(w, rec, outcome, {result = true})
bad = misfit(w)
if bad then return redis.error_reply(bad) end
if lists then
  if redis.call('LREM', lists[1], 1, text) == 0 and redis.call('LREM', lists[2], 1, text) == 0 then
    return {0, 0}
  end
else
  redis.call('HDEL', dependents, jid)
end
local now = wf_now()
local reason = 'cancelled while waiting' .. (ARGV[3] ~= '' and (': ' .. ARGV[3]) or '')
local _, released = waiter_give_up(W.P, {text = text, jid = jid, outcome = outcome,
  class = 'rfetch.JobCancelled', reason = reason, why = 'was ' .. reason, now = now})
return {1, released}
