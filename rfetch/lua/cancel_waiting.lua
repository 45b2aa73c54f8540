-- cancel_waiting.lua: cancel a job that waits on another one (after=): take it out of its
-- dependency's dependents hash and drop it (counted) or bury it (the dead set, error class
-- rfetch.JobCancelled), write its record if it has store_result, and settle the jobs
-- waiting on it as its death does. Atomic with complete.lua's release: a job released
-- first is in its queue and is not found here. Called by
-- rfetch.store.workflow_commands.WorkflowCommands.cancel_waiting only.
--
-- KEYS[1]: the namespace prefix P ("" or "<ns>:"), for lib/workflow.lua's derived keys.
-- KEYS[2]: the index of waiting jobs "rfetch:waiting".
-- KEYS[3]: the dead set "dead".
-- KEYS[4]: the "queues" set.
-- KEYS[5]: the counter "rfetch:deps-cancelled".
-- KEYS[6]: the counter "rfetch:results-stored".
-- KEYS[7]: the dependents hash of its dependency "rfetch:dependents:<after>".
-- KEYS[8], KEYS[9]: its record "rfetch:result:<jid>" and wake list
--          "rfetch:result-wake:<jid>".
-- ARGV[1]: jid. ARGV[2]: "1" to bury it in the dead set, "" to drop it. ARGV[3]: reason.
-- Derived keys: those of lib/workflow.lua.
-- Returns {1 if cancelled (0: not waiting there), jobs settled behind it}.
-- #include guard
-- #include workflow
local W = {P = KEYS[1], waiting = KEYS[2], dead = KEYS[3], queues = KEYS[4],
           cancelled = KEYS[5], stored = KEYS[6]}
local w = wants_new()
for i, kind in ipairs({'string', 'hash', 'zset', 'set', 'string', 'string', 'hash'}) do
  if i > 1 then want(w, KEYS[i], kind) end
end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local text = redis.call('HGET', KEYS[7], ARGV[1])
if not text then return {0, 0} end
redis.call('HDEL', KEYS[7], ARGV[1])
redis.call('HDEL', W.waiting, ARGV[1])
local now = wf_now()
local reason = 'cancelled while waiting' .. (ARGV[3] ~= '' and (': ' .. ARGV[3]) or '')
local status = 'cancelled'
if ARGV[2] == '1' then
  redis.call('ZADD', W.dead, now, wf_buried(text, 'rfetch.JobCancelled', reason, now))
  status = 'dead'
else
  redis.call('INCR', W.cancelled)
end
local ttl = tonumber(wf_field(text, 'store_result'))
if ttl then
  wf_record(W, ARGV[1], ttl, {'status', status, 'error_class', 'rfetch.JobCancelled',
    'error_message', reason, 'finished_at', string.format('%.6f', now),
    'class', tostring(wf_field(text, 'class'))})
end
return {1, wf_release(W, ARGV[1], status, 'was ' .. reason, now)}
