-- #include guard
-- #include keys
-- #include gate
-- #include cap
-- #include workflow
-- #include batch
-- #include record
-- lib/outcome.lua: every way a job ends, and what each feature does for it, in one place.
-- The names are those of rfetch/store/outcomes.py (JobOutcome). An ending script takes the
-- job out of its list atomically, then calls job_end once; a guard check (job_end_wants,
-- lib/guard.lua) comes before the script's first write.
--
-- OUTCOME_EFFECTS: outcome -> what each feature does (absent: nothing).
--   gate    ordering key: 'release' (the key's next job goes out), 'keep' (the key stays
--           held, only the running lease is dropped: strict order survives retries), or
--           'push_back' (the gate's push-back rule; a tenant job to the head of its list).
--   unique  unique lock: 'release' (dropped if the job holds it), else kept.
--   cap     fetch cap's slot: 'release' (given back), or 'push_back' (given back, and the
--           job to the head of its key's waiting list).
--   batch   the batch event: 'ok' (succeeded), 'fail' (retry set), 'dead' (a death).
--   result  store_result: the recorded status, written when the caller gives the record's
--           fields (complete.lua), and the jobs waiting on it released.
local OUTCOME_EFFECTS = {
  succeeded   = {gate = 'release', unique = 'release', cap = 'release', batch = 'ok',
                 result = 'succeeded'},
  failed      = {gate = 'keep', cap = 'release', batch = 'fail'},
  skipped     = {gate = 'release', cap = 'release', batch = 'fail'},
  died        = {gate = 'release', unique = 'release', cap = 'release', batch = 'dead',
                 result = 'dead'},
  discarded   = {gate = 'release', unique = 'release', cap = 'release', batch = 'dead',
                 result = 'dead'},
  expired     = {gate = 'release', unique = 'release', cap = 'release', batch = 'dead',
                 result = 'dead'},
  poison      = {gate = 'release', unique = 'release', cap = 'release', batch = 'dead',
                 result = 'dead'},
  cancelled   = {gate = 'release', unique = 'release', cap = 'release', batch = 'dead',
                 result = 'cancelled'},
  deleted     = {gate = 'release', unique = 'release', cap = 'release'},
  rescheduled = {gate = 'keep', cap = 'release'},
  pushed_back = {gate = 'push_back', cap = 'push_back'},
  recovered   = {gate = 'push_back', cap = 'push_back'},
}

-- The effects of outcome, or nil with an error message for an unknown name.
local function outcome_effects(outcome)
  local e = OUTCOME_EFFECTS[outcome]
  if not e then
    return nil, 'ERR unknown outcome ' .. tostring(outcome) .. ': nothing was changed'
  end
  return e, nil
end

-- Add to w every key job_end(rec, outcome, ...) may write, with its type (lib/guard.lua).
-- info.result: the caller records the outcome or releases the jobs waiting on it (their
-- keys are then checked when jobs wait on this one).
local function job_end_wants(w, rec, outcome, info)
  local e = OUTCOME_EFFECTS[outcome]
  local G = rec.G
  if e.gate == 'push_back' then
    if rec.C then
      cap_push_back_wants(w, rec.C, rec.ck)
    else
      gate_push_back_wants(w, G, rec.key, rec.klist, rec.jid, rec.tenant, prio_of(rec.prio))
    end
    want(w, G.queues, 'set')
    return
  end
  if rec.key then
    if e.gate == 'release' then gate_release_wants(w, G, rec.klist)
    elseif e.gate == 'keep' then want(w, G.leases, 'zset') end
  end
  if rec.lock and e.unique == 'release' then unique_release_wants(w, rec.lock) end
  if rec.C and e.cap then cap_release_wants(w, rec.C) end
  if info and info.result and rec.jid
      and redis.call('EXISTS', key_of(rec.P, 'dependents', rec.jid)) == 1 then
    local W = wf_keys(rec.P)
    want(w, key_of(rec.P, 'dependents', rec.jid), 'hash')
    want(w, W.waiting, 'hash')
    want(w, W.dead, 'zset')
    want(w, W.queues, 'set')
  end
end

-- A push-back (the job to the head of its stage): capped, keyed or tenant, of the priority
-- set (first of its priority), or plain.
local function job_push_back(rec, raw)
  local G = rec.G
  local p = prio_of(rec.prio)
  if rec.C then
    cap_push_back(rec.C, rec.ck, raw)
  elseif gate_push_back(G, raw, rec.key, rec.klist, rec.jid, rec.tenant, p) then
    return
  elseif p then
    gate_out(G, raw, nil, true, p)
  else
    redis.call('RPUSH', G.queue, raw)
    redis.call('SADD', G.queues, G.q)
    redis.call('PUBLISH', G.queue, '')  -- wakes idle workers of q (rfetch.worker.wake)
  end
end

-- What job_end does for job rec (below), but the jobs it dooms (waiting jobs that will
-- never run: wf_release's and batch_death's) are appended to doomed, not ended.
local function job_effects(rec, outcome, raw, info, doomed)
  local e = OUTCOME_EFFECTS[outcome]
  if e.gate == 'push_back' then
    job_push_back(rec, raw)
    return 0
  end
  if not info.keep_keys then
    if rec.key then
      if e.gate == 'release' then
        gate_release(rec.G, rec.key, rec.klist, rec.jid)
      elseif e.gate == 'keep' then
        redis.call('ZREM', rec.G.leases, gate_lease_member(rec.key, rec.jid))
      end
    end
    if rec.lock and e.unique == 'release' then unique_release(rec.lock, rec.jid) end
    if rec.C and e.cap then cap_release(rec.C, rec.ck, raw) end
  end
  local released = 0
  if e.result and rec.jid and (info.result or info.release) then
    local W = wf_keys(rec.P)
    if info.result then wf_record(W, rec.jid, tonumber(rec.ttl), info.result) end
    if redis.call('EXISTS', key_of(rec.P, 'dependents', rec.jid)) == 1 then
      released = wf_release(W, rec.jid, e.result, info.why or '', doomed)
    end
  end
  if rec.bhash and e.batch then
    batch_event(rec.P, rec.bhash, rec.jid or '', e.batch, info.failure or '', doomed)
  end
  return released
end

-- The outcome of a waiting job that will never run: "cancelled" (dropped, counted) when its
-- payload says "on_dependency_death":"cancel" (the workflow options), else "died".
local function waiter_outcome(text)
  if wf_field(text, 'on_dependency_death') == 'cancel' then return 'cancelled' end
  return 'died'
end

-- The end of a waiting job (after=) that will never run, x = {text (its payload), reason,
-- now (Redis time), and optionally jid (else the payload's), outcome (else
-- waiter_outcome), class (the error class, else rfetch.DependencyFailed), why (the text
-- of its death for the jobs behind it)}: "died" puts it in the dead set with the error
-- fields, "cancelled" counts it in "rfetch:deps-cancelled"; then every feature's effect of
-- that outcome (job_effects): its record, its batch's death, its key and lock left free.
-- Keys of another type among its key, lock or slot are left alone (keep_keys). Returns its
-- status and the number of waiting jobs taken out behind it (doomed: as job_effects).
local function waiter_end(P, x, doomed)
  local ok, job = pcall(cjson.decode, x.text)
  local rec = record_of_job(P, ok and type(job) == 'table' and job or {})
  rec.jid = x.jid or rec.jid
  local outcome = x.outcome or waiter_outcome(x.text)
  local class, W = x.class or 'rfetch.DependencyFailed', wf_keys(P)
  if outcome == 'cancelled' then
    redis.pcall('INCR', W.cancelled)
  else
    redis.call('ZADD', W.dead, x.now, wf_buried(x.text, class, x.reason, x.now))
  end
  if rec.jid then redis.pcall('HDEL', W.waiting, rec.jid) end
  local status = OUTCOME_EFFECTS[outcome].result
  local fields = nil
  if rec.ttl and rec.jid then
    fields = {'status', status, 'error_class', class, 'error_message', x.reason,
      'finished_at', string.format('%.6f', x.now), 'class', rec.class or ''}
  end
  local w = wants_new()
  job_end_wants(w, rec, outcome, nil)
  return status, job_effects(rec, outcome, x.text, {result = fields, release = true,
    keep_keys = misfit(w) ~= nil, now = x.now,
    why = x.why or ('was ' .. status .. ' (' .. x.reason .. ')'),
    failure = cjson.encode({error_class = class, error_message = x.reason})}, doomed)
end

-- End every doomed waiting job, and those each dooms in turn (a chain's tail, a batch's
-- waiting jobs), one at a time (no recursion: a chain may be long). now: Redis time, or
-- nil (read when first needed). Returns the number of waiting jobs taken out.
local function waiters_end(P, doomed, now)
  local released = 0
  while #doomed > 0 do
    local x = table.remove(doomed)
    now = now or wf_now()
    x.now = now
    local _, n = waiter_end(P, x, doomed)
    released = released + n
  end
  return released
end

-- A waiting job given up by the caller (depend.lua: its dependency is dead at its push;
-- cancel_waiting.lua: a cancel), x as waiter_end's, already out of its dependents hash or
-- batch list. Returns its status and the number of waiting jobs taken out behind it.
local function waiter_give_up(P, x)
  local doomed = {}
  local status, released = waiter_end(P, x, doomed)
  return status, released + waiters_end(P, doomed, x.now)
end

-- The end of job rec (lib/record.lua; raw: its exact payload), already taken out of its
-- list by the caller, as outcome says. info (a table, may be nil):
--   failure   the failure's JSON {"error_class", "error_message"} for the batch
--   keep_keys true: the ordering key, lock and slot are left as they are (fetch.lua's
--             acknowledgement whose release keys hold another type), the rest is done
--   result    the recorded outcome's fields (complete.lua, abandon.lua): written with
--             rec.ttl, and the jobs waiting on it released
--   release   true: the jobs waiting on it are released even with no record to write
--             (abandon.lua); info.why: the text of a death, info.now: Redis time.
-- The waiting jobs that will never run because of this end (after=, a batch's death) end
-- through waiter_end, with the same effects. Returns the number of waiting jobs taken out
-- of their dependents hash (0 without info.result or info.release).
local function job_end(rec, outcome, raw, info)
  info = info or {}
  local doomed = {}
  local released = job_effects(rec, outcome, raw, info, doomed)
  return released + waiters_end(rec.P, doomed, info.now)
end
