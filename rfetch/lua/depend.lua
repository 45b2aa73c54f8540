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
-- KEYS[1]: the namespace prefix P ("" or "<ns>:"), for lib/workflow.lua's derived keys.
-- KEYS[2]: the index of waiting jobs "rfetch:waiting".
-- KEYS[3]: the dead set "dead".
-- KEYS[4]: the "queues" set.
-- KEYS[5]: the counter "rfetch:deps-cancelled".
-- KEYS[6]: the counter "rfetch:results-stored".
-- KEYS[7 + 8(j-1) .. 14 + 8(j-1)] (j = 1..N): for the j-th job, its dependency's record
--          "rfetch:result:<after>" and dependents hash "rfetch:dependents:<after>" (the
--          job's own when it has no dependency: unused), its queue "queue:<q>", its own
--          record "rfetch:result:<jid>" and wake list "rfetch:result-wake:<jid>", then the
--          keys of a batch of id <after> (lib/batch.lua's dependency hook): its hash
--          "b-<after>" and waiting lists "b-<after>-waiting-success",
--          "b-<after>-waiting-complete".
-- ARGV[1]: N, the number of jobs; then N records of four values, in push order: jid, the
--          dependency's jid ("" for none), the payload (JSON text, with "queue", "class" and
--          the options "after_outcome", "on_dependency_death", "store_result"), queue <q>.
-- Derived keys: those of lib/workflow.lua and lib/batch.lua.
--
-- <after> names a batch when its hash "b-<after>" exists (jids and bids are both 24 random
-- hex characters and never meet): the job then waits for the batch's success (or complete,
-- with after_outcome "complete") through lib/batch.lua's batch_wait, which pushes it when
-- the event fires, or buries it (or drops it, on_dependency_death "cancel") when a batch
-- it waits on to succeed dies.
--
-- Every key is checked before the first write (lib/guard.lua): a misfit writes nothing and
-- is an error reply. A dependency whose record has expired (or that was pushed without
-- store_result) cannot be told from one still to run: the job waits, listed in
-- "rfetch:waiting" (explain, metrics) until cancelled.
-- Returns, per job: "queued", "waiting", "dead" or "cancelled".
-- #include guard
-- #include workflow
-- #include batch
local W = {P = KEYS[1], waiting = KEYS[2], dead = KEYS[3], queues = KEYS[4],
           cancelled = KEYS[5], stored = KEYS[6]}
local n = tonumber(ARGV[1])
local w = wants_new()
want(w, W.waiting, 'hash')
want(w, W.dead, 'zset')
want(w, W.queues, 'set')
want(w, W.cancelled, 'string')
want(w, W.stored, 'string')
for j = 1, n do
  local b = 7 + 8 * (j - 1)
  for i, kind in ipairs({'hash', 'hash', 'list', 'hash', 'list', 'hash', 'list', 'list'}) do
    want(w, KEYS[b + i - 1], kind)
  end
end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local now = wf_now()
local out = {}
for j = 1, n do
  local b, a = 7 + 8 * (j - 1), 2 + 4 * (j - 1)
  local jid, after, text, q = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local status = nil
  if after ~= '' then status = redis.call('HGET', KEYS[b], 'status') end
  local complete = wf_field(text, 'after_outcome') == 'complete'
  if after ~= '' and redis.call('EXISTS', KEYS[b + 5]) == 1 then
    local got = batch_wait(W.P, KEYS[b + 5], complete and 'complete' or 'success', text, q, now)
    if got == 'pushed' then
      out[j] = 'queued'
    elseif got == 'dead' then

    else
      redis.call('HSET', W.waiting, jid, cjson.encode({after = after, since = now, queue = q,
        class = wf_field(text, 'class'), batch = true}))
      out[j] = 'waiting'
    end
  elseif after == '' or status == 'succeeded'
      or (complete and (status == 'dead' or status == 'cancelled')) then
    redis.call('LPUSH', KEYS[b + 2], text)
    redis.call('PUBLISH', KEYS[b + 2], '')  -- wakes idle workers of q (rfetch.worker.wake)
    redis.call('SADD', W.queues, q)
    out[j] = 'queued'
  elseif status == 'dead' or status == 'cancelled' then
    local why = status == 'dead' and ('died (' .. tostring(redis.call('HGET', KEYS[b],
      'error_class')) .. ': ' .. tostring(redis.call('HGET', KEYS[b], 'error_message')) .. ')')
      or 'was cancelled'
    out[j] = wf_fail_waiter(W, jid, text, 'dependency ' .. after .. ' ' .. why, now)
  else
    redis.call('HSET', KEYS[b + 1], jid, text)
    redis.call('HSET', W.waiting, jid, cjson.encode({after = after, since = now, queue = q,
      class = wf_field(text, 'class')}))
    out[j] = 'waiting'
  end
end
return out
