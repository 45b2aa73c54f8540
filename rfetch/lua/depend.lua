-- depend.lua: push jobs of which some wait on another job (after=), all or none: a job with
-- no dependency goes to its queue; a job whose dependency succeeded (or finished either way,
-- with after_outcome "complete") goes to its queue at once; one whose dependency died or was
-- cancelled, and that asks for success, goes to the dead set or is dropped
-- (on_dependency_death); any other waits in its dependency's "rfetch:dependents:<jid>" hash,
-- outside every queue, until complete.lua releases it. Registration and release are both
-- atomic scripts on the dependency's record and dependents hash, so no release is missed:
-- either the record exists when the job registers, or the job is registered when the
-- record is written. Called by rfetch.store.workflow_commands.WorkflowCommands.depend only.
--
-- KEYS[1]: the namespace prefix P ("" or "<ns>:"), from which the records' keys and those
--          of lib/workflow.lua and lib/batch.lua are derived (lib/keys.lua).
-- KEYS[2]: the index of waiting jobs "rfetch:waiting".
-- KEYS[3]: the dead set "dead".
-- KEYS[4]: the "queues" set.
-- KEYS[5]: the counter "rfetch:deps-cancelled".
-- KEYS[6]: the counter "rfetch:results-stored".
-- ARGV[1]: N, the number of jobs; then N pairs, in push order: the payload (JSON text, with
--          "queue", "class" and the options "after_outcome", "on_dependency_death"), and
--          the job's record (lib/record.lua: q, jid, after: the jid or bid it waits on,
--          absent for none; ttl and class when it has store_result).
-- Derived keys, per job (<d>: its dependency, or its own jid when it has none: unused): the
--          dependency's record "rfetch:result:<d>" and dependents hash
--          "rfetch:dependents:<d>", its queue "queue:<q>", its own record
--          "rfetch:result:<jid>" and wake list "rfetch:result-wake:<jid>", a batch of id <d>
--          (lib/batch.lua's dependency hook): its hash "b-<d>" and waiting lists
--          "b-<d>-waiting-success", "b-<d>-waiting-complete"; then those of
--          lib/workflow.lua, lib/batch.lua and lib/outcome.lua.
--
-- <after> names a batch when its hash "b-<after>" exists (jids and bids are both 24 random
-- hex characters and never meet): the job then waits for the batch's success (or complete,
-- with after_outcome "complete") through lib/batch.lua's batch_wait, which pushes it when
-- the event fires; the call that fires the batch's death ends it (lib/outcome.lua).
-- A job whose dependency job or batch died or was cancelled, and that asks for success,
-- ends here through lib/outcome.lua's waiter_give_up: outcome "died" (to the dead set, error class
-- rfetch.DependencyFailed) or "cancelled" (dropped, counted; on_dependency_death "cancel"),
-- its record written if it has store_result and the jobs waiting on it settled.
--
-- Every key is checked before the first write (lib/guard.lua): a misfit writes nothing and
-- is an error reply. A dependency whose record has expired (or that was pushed without
-- store_result) cannot be told from one still to run: the job waits, listed in
-- "rfetch:waiting" (explain, metrics) until cancelled.
-- Returns, per job: "queued", "waiting", "dead" or "cancelled".
-- #include outcome
local W = {P = KEYS[1], waiting = KEYS[2], dead = KEYS[3], queues = KEYS[4],
           cancelled = KEYS[5], stored = KEYS[6]}
local P, n = KEYS[1], tonumber(ARGV[1])
local w = wants_new()
want(w, W.waiting, 'hash')
want(w, W.dead, 'zset')
want(w, W.queues, 'set')
want(w, W.cancelled, 'string')
want(w, W.stored, 'string')
local jobs = {}
for j = 1, n do
  local rec = record_of(P, ARGV[2 * j + 1])
  local jid = rec.jid or ''
  local dep = rec.after or jid
  local d = {text = ARGV[2 * j], rec = rec, jid = jid, result = key_of(P, 'result', dep),
    dependents = key_of(P, 'dependents', dep), queue = key_of(P, 'queue', rec.q),
    bhash = key_of(P, 'batch', dep)}
  want(w, d.result, 'hash')
  want(w, d.dependents, 'hash')
  want(w, d.queue, 'list')
  want(w, key_of(P, 'result', jid), 'hash')
  want(w, key_of(P, 'result_wake', jid), 'list')
  want(w, d.bhash, 'hash')
  want(w, d.bhash .. '-waiting-success', 'list')
  want(w, d.bhash .. '-waiting-complete', 'list')
  if rec.after then job_end_wants(w, rec, 'died', {result = true}) end
  jobs[j] = d
end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local now = wf_now()

-- The end of job d whose dependency did not succeed (reason: why): lib/outcome.lua's
-- waiter_give_up, "died" or "cancelled" as its on_dependency_death says. Returns its
-- status ("dead" or "cancelled").
local function dependency_failed(d, reason)
  local status = waiter_give_up(P, {text = d.text, jid = d.jid ~= '' and d.jid or nil,
    reason = reason, now = now})
  return status
end

-- The index entry of a waiting job: what it waits on, since when, its queue and class.
local function waiting_entry(d, batch)
  return cjson.encode({after = d.rec.after, since = now, queue = d.rec.q,
    class = wf_field(d.text, 'class'), batch = batch})
end

local out = {}
for j = 1, n do
  local d = jobs[j]
  local after, text, q = d.rec.after, d.text, d.rec.q
  local status = nil
  if after then status = redis.call('HGET', d.result, 'status') end
  local complete = wf_field(text, 'after_outcome') == 'complete'
  if after and redis.call('EXISTS', d.bhash) == 1 then
    local got, why = batch_wait(P, d.bhash, complete and 'complete' or 'success', text, q)
    if got == 'pushed' then
      out[j] = 'queued'
    elseif got == 'dead' then
      out[j] = dependency_failed(d, why)
    else
      redis.call('HSET', W.waiting, d.jid, waiting_entry(d, true))
      out[j] = 'waiting'
    end
  elseif not after or status == 'succeeded'
      or (complete and (status == 'dead' or status == 'cancelled')) then
    redis.call('LPUSH', d.queue, text)
    redis.call('PUBLISH', d.queue, '')  -- wakes idle workers of q (rfetch.worker.wake)
    redis.call('SADD', W.queues, q)
    out[j] = 'queued'
  elseif status == 'dead' or status == 'cancelled' then
    local why = status == 'dead' and ('died (' .. tostring(redis.call('HGET', d.result,
      'error_class')) .. ': ' .. tostring(redis.call('HGET', d.result, 'error_message')) .. ')')
      or 'was cancelled'
    out[j] = dependency_failed(d, 'dependency ' .. after .. ' ' .. why)
  else
    redis.call('HSET', d.dependents, d.jid, text)
    redis.call('HSET', W.waiting, d.jid, waiting_entry(d, nil))
    out[j] = 'waiting'
  end
end
return out
