-- complete.lua: the end of a job whose outcome is recorded (store_result): its
-- acknowledgement (success), or its death (the dead set, or discarded), together with its
-- record, the wake token of rfetch.result, and the release of the jobs waiting on it, in one
-- atomic step: a record exists exactly when the job was acknowledged or buried. Called by
-- rfetch.store.workflow_commands.WorkflowCommands.complete only.
--
-- KEYS[1]: the private list "queue:sq|<identity>|<q>" holding the job.
-- KEYS[2]: the namespace prefix P ("" or "<ns>:"), for the derived keys of lib/workflow.lua.
-- KEYS[3]: the index of waiting jobs "rfetch:waiting".
-- KEYS[4]: the dead set "dead".
-- KEYS[5]: the "queues" set.
-- KEYS[6]: the counter "rfetch:deps-cancelled".
-- KEYS[7]: the counter "rfetch:results-stored".
-- KEYS[8]: this job's record "rfetch:result:<jid>".
-- KEYS[9]: its wake list "rfetch:result-wake:<jid>".
-- KEYS[10]: the jobs waiting on it "rfetch:dependents:<jid>".
-- KEYS[11..17] (a job with an ordering key or a unique lock only): the seven gate keys of
--          <q> (lib/gate.lua's G), then its key's waiting list "rfetch:key:<q>:<k>" if it
--          has an ordering key, then its unique lock "rfetch:unique:<digest>" if it has one.
-- ARGV[1]: the raw payload as fetched (what LREM matches).
-- ARGV[2]: jid.
-- ARGV[3]: status: "succeeded" or "dead".
-- ARGV[4]: seconds to keep the record (the job's store_result).
-- ARGV[5]: the return value as JSON text ("" for a death).
-- ARGV[6], ARGV[7]: error class and message of a death ("" for a success).
-- ARGV[8]: the payload to store in the dead set ("" for none: a success, or a death whose
--          payload says "dead": false, which is discarded).
-- ARGV[9], ARGV[10]: dead set trim (drop entries scored below, float epoch s) and cap.
-- ARGV[11]: the job's class name.
-- ARGV[12..14] (with KEYS[11..] only): queue <q>, ordering key ("" for none), unique digest
--          ("" for none). A batched job that has neither passes them as "".
-- ARGV[15], ARGV[16] (a batched job only): "ok" (success) or "dead", and the failure's JSON
--          {"error_class", "error_message"}; KEYS[next]: its batch hash "b-<bid>"
--          (lib/batch.lua, counted in this same call).
-- ARGV[17] (a capped job only, fetch caps): its concurrency key; ARGV[12..16] are then all
--          present ("" where unused), and the six cap keys of <q> (lib/cap.lua's C) follow
--          the job's gate keys, before the batch hash: its slot is given back.
-- Derived keys: those of lib/workflow.lua, for the jobs waiting on this one; those of
--          lib/batch.lua (the batch's other keys, its parents', a callback's queue).
--
-- The keys it may write are checked first (lib/guard.lua), the numbers too: the dead set for
-- a death, the keys of the release only when jobs wait on this one (one EXISTS), the gate's
-- and the batch's; the private list needs none (LREM, the first write, fails on another
-- type), the record and wake list are replaced whatever they held, and the counters are
-- advisory. A misfit changes nothing and is an error reply, so the job stays in its private
-- list. Only if the LREM removed the job (it was not pushed back or settled meanwhile) is
-- anything written. Several calls go in one pipeline (worker/outcome.py), each atomic.
-- Returns {removed (1/0), jobs released from waiting}.
-- #include guard
-- #include gate
-- #include cap
-- #include workflow
-- #include batch
local W = {P = KEYS[2], waiting = KEYS[3], dead = KEYS[4], queues = KEYS[5],
           cancelled = KEYS[6], stored = KEYS[7]}
local dead_text = ARGV[8]
-- The private list needs no check: LREM is the first write and fails on another type.
-- The keys the release of waiting jobs writes are checked only when jobs wait on this one
-- (most jobs: one EXISTS); the counters are advisory (lib/workflow.lua).
local has_dependents = redis.call('EXISTS', KEYS[10]) == 1
local w = wants_new()
if dead_text ~= '' then want(w, W.dead, 'zset') end
if has_dependents then
  want(w, KEYS[10], 'hash')
  want(w, W.waiting, 'hash')
  want(w, W.dead, 'zset')
  want(w, W.queues, 'set')
end
local G, k, klist, lock = nil, nil, nil, nil
local next_key = 11
if opt(ARGV[12]) then
  k = opt(ARGV[13])
  G = gate_keys(11, ARGV[12])
  klist, lock, next_key = job_keys(18, k, opt(ARGV[14]))
  if k then gate_release_wants(w, G, klist) end
  if lock then unique_release_wants(w, lock) end
end
local C = nil  -- a capped job (fetch caps): its slot is given back with its end
if opt(ARGV[17]) then
  C = cap_keys(next_key, ARGV[12])
  next_key = next_key + 6
  cap_release_wants(w, C)
end
local bhash = opt(ARGV[15]) and KEYS[next_key]
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
local ttl = finite(ARGV[4])
if not ttl or ttl <= 0 or (ARGV[9] ~= '' and not finite(ARGV[9]))
    or (ARGV[10] ~= '' and not finite(ARGV[10])) then
  return redis.error_reply('ERR complete: ttl ' .. ARGV[4] .. ', trim ' .. ARGV[9] ..
    ' or cap ' .. ARGV[10] .. ' is not a number: nothing was changed')
end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return {0, 0}
end
local now = wf_now()
if dead_text ~= '' then
  redis.call('ZADD', W.dead, now, dead_text)
  if ARGV[9] ~= '' then redis.call('ZREMRANGEBYSCORE', W.dead, '-inf', '(' .. ARGV[9]) end
  if ARGV[10] ~= '' then redis.call('ZREMRANGEBYRANK', W.dead, 0, -(tonumber(ARGV[10]) + 1)) end
end
if G then
  if k then gate_release(G, k, klist, ARGV[2]) end
  if lock then unique_release(lock, ARGV[2]) end
end
if C then cap_release(C, ARGV[17], ARGV[1]) end
local fields = {'status', ARGV[3], 'finished_at', string.format('%.6f', now), 'class', ARGV[11]}
local why = ''
if ARGV[3] == 'succeeded' then
  fields[#fields + 1] = 'result'
  fields[#fields + 1] = ARGV[5]
else
  for _, f in ipairs({'error_class', ARGV[6], 'error_message', ARGV[7]}) do
    fields[#fields + 1] = f
  end
  why = 'died (' .. ARGV[6] .. ': ' .. ARGV[7] .. ')'
end
wf_record(W, ARGV[2], ttl, fields)
local released = has_dependents and wf_release(W, ARGV[2], ARGV[3], why, now) or 0
if bhash then batch_event(W.P, bhash, ARGV[2], ARGV[15], ARGV[16]) end
return {1, released}
