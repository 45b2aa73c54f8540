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

-- The end of job rec (lib/record.lua; raw: its exact payload), already taken out of its
-- list by the caller, as outcome says. info (a table, may be nil):
--   failure   the failure's JSON {"error_class", "error_message"} for the batch
--   keep_keys true: the ordering key, lock and slot are left as they are (fetch.lua's
--             acknowledgement whose release keys hold another type), the rest is done
--   result    the recorded outcome's fields (complete.lua, abandon.lua): written with
--             rec.ttl, and the jobs waiting on it released
--   release   true: the jobs waiting on it are released even with no record to write
--             (abandon.lua); info.why: the text of a death, info.now: Redis time.
-- Returns the number of waiting jobs released (0 without info.result).
local function job_end(rec, outcome, raw, info)
  local e = OUTCOME_EFFECTS[outcome]
  info = info or {}
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
      released = wf_release(W, rec.jid, e.result, info.why or '', info.now or wf_now())
    end
  end
  if rec.bhash and e.batch then
    batch_event(rec.P, rec.bhash, rec.jid or '', e.batch, info.failure or '')
  end
  return released
end
