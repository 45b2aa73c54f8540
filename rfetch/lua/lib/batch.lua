-- #include keys
-- lib/batch.lua: a batch's counters and callbacks (Sidekiq Pro batches), changed in the same
-- call as the job's acknowledgement, retry-set entry or death: lib/outcome.lua's batch
-- effect, for every ending script. Included with a "-- #include batch" line (by
-- lib/outcome.lua, batch_push.lua). A job waiting for the success of a batch that dies is
-- handed back to the caller (doomed), and job_end ends it as any other job.
--
-- Keys of a batch (docs/data-model.md), all derived from its hash "b-<bid>":
--   b-<bid>                  hash: engine ("rfetch"), bid, description, created_at, total, pending,
--                            failures (jobs in failinfo), parent,
--                            kids, kids_pending, kids_incomplete, ttl, success_ttl,
--                            cb_<event> (a callback's payload template), cbargs_<event>
--                            (the JSON text of its arguments after the status, without
--                            the brackets: a callback's options, or a chord body's own
--                            arguments), cbplain_<event> ("1": no status argument, a
--                            chord's body), complete_at / success_at / death_at
--                            (Redis time, epoch s, each written once: the fire-once marks).
--   b-<bid>-jids             set: every jid of the batch.
--   b-<bid>-done             set: the jids that succeeded (SADD's reply counts each once).
--   b-<bid>-failinfo         hash: jid -> JSON {"error_class", "error_message"} of the jobs
--                            that failed and have not succeeded since (Sidekiq Pro's
--                            failures; HDEL on success).
--   b-<bid>-died             set: the jids that died (dead set, or discarded).
--   b-<bid>-kids             set: bids of the child batches.
--   b-<bid>-waiting-success  list: payloads pushed to their queue when success fires, moved
--                            to the dead set when the batch's death fires (the dependency hook).
--   b-<bid>-waiting-complete list: payloads pushed to their queue when complete fires.
-- done, died and failinfo are created with the batch holding an empty member "" (so each has
-- its TTL from the start and no event pays an EXPIRE).
-- A callback or waiting job goes to "<P>queue:<q>" and "<P>queues" (P: namespace prefix); a
-- waiting job leaves the index of waiting jobs "<P>rfetch:waiting" (depend.lua's) when it is
-- released or buried.
-- Counters of events (Prometheus): "<P>rfetch:batches-created" (batch_push.lua),
-- "-completed", "-succeeded", "-died": INCR when the event fires.
--
-- Events: complete when pending <= failures (every job succeeded or failed at least once:
-- Sidekiq Pro's rule) and every child batch completed; success when pending = 0 and every
-- child batch succeeded; death when a job dies (once per batch, and up its parents).

local BATCH_PARTS = {'-jids', '-done', '-failinfo', '-died', '-kids', '-waiting-success',
  '-waiting-complete'}

local function batch_time()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function batch_hash(P, bid) return key_of(P, 'batch', bid) end

local function batch_expire(hash, ttl)
  redis.call('EXPIRE', hash, ttl)
  for _, part in ipairs(BATCH_PARTS) do redis.call('EXPIRE', hash .. part, ttl) end
end

-- The status given to callbacks, as JSON text (built by hand: cjson writes an empty list as
-- an object).
local function batch_status_json(hash)
  local v = redis.call('HMGET', hash, 'bid', 'description', 'total', 'pending', 'created_at',
    'parent', 'failures', 'complete_at')
  local failed = {}  -- the first 1,000 failed jids
  for _, jid in ipairs(redis.call('HKEYS', hash .. '-failinfo')) do
    if jid ~= '' and #failed < 1000 then failed[#failed + 1] = cjson.encode(jid) end
  end
  return '{"bid":' .. cjson.encode(v[1] or '') ..
    ',"description":' .. cjson.encode(v[2] or '') ..
    ',"total":' .. (tonumber(v[3]) or 0) .. ',"pending":' .. (tonumber(v[4]) or 0) ..
    ',"failures":' .. (tonumber(v[7]) or #failed) .. ',"failed_jids":[' .. table.concat(failed, ',') .. ']' ..
    ',"created_at":' .. (tonumber(v[5]) or 0) ..
    ',"parent_bid":' .. (v[6] and cjson.encode(v[6]) or 'null') ..
    ',"complete":' .. (v[8] and 'true' or 'false') .. '}'
end

-- Take a job waiting on a batch out of the index of waiting jobs (depend.lua), if indexed.
local function batch_unindex(P, job)
  local index = key_of(P, 'waiting')
  if type(job) == 'table' and type(job['jid']) == 'string'
      and redis.call('TYPE', index)['ok'] == 'hash' then
    redis.call('HDEL', index, job['jid'])
  end
end

local function batch_enqueue(P, text, queue)
  redis.call('LPUSH', key_of(P, 'queue', queue), text)
  redis.call('PUBLISH', key_of(P, 'queue', queue), '')  -- wakes idle workers (rfetch.worker.wake)
  redis.call('SADD', key_of(P, 'queues'), queue)
end

-- Push the callback of event (if any): its template with args [status, <cbargs>] (only
-- [<cbargs>] when cbplain_<event> is set: a chord's body) and enqueued_at (the template's
-- jid was chosen when the batch was created).
local function batch_callback(P, hash, event, now)
  local v = redis.call('HMGET', hash, 'cb_' .. event, 'cbargs_' .. event, 'cbplain_' .. event)
  if not v[1] then return end
  local job = cjson.decode(v[1])
  job['args'] = nil
  job['enqueued_at'] = now
  local text = cjson.encode(job)
  local args = v[2] or ''
  if not v[3] then  -- a Sidekiq Pro callback: the status first
    args = batch_status_json(hash) .. (args ~= '' and (',' .. args) or '')
  end
  text = '{"args":[' .. args .. '],' .. string.sub(text, 2)
  batch_enqueue(P, text, job['queue'])
end

-- The jobs waiting for this event of the batch go to their queue (as stored).
local function batch_release(P, list, now)
  while true do
    local text = redis.call('RPOP', list)
    if not text then return end
    local ok, job = pcall(cjson.decode, text)
    if ok then batch_unindex(P, job) end
    if ok and type(job) == 'table' and type(job['queue']) == 'string' and job['queue'] ~= '' then
      batch_enqueue(P, text, job['queue'])
    else
      redis.call('ZADD', key_of(P, 'dead'), now, text)
    end
  end
end

-- A batch's state, or nil when the hash is missing (expired, unknown bid), of another type
-- (HMGET through pcall, so an acknowledgement never fails after its LREM because of a batch
-- key), or not rfetch's (a Sidekiq Pro batch of the same Redis has a "b-<bid>" hash too,
-- without the "engine" field): the batch is then left alone.
local function batch_read(hash)
  local v = redis.pcall('HMGET', hash, 'total', 'pending', 'failures', 'kids_pending',
    'kids_incomplete', 'complete_at', 'success_at', 'parent', 'success_ttl', 'engine')
  if type(v) ~= 'table' or v['err'] or not v[1] or v[10] ~= 'rfetch' then return nil end
  return {pending = tonumber(v[2]) or 0, failures = tonumber(v[3]) or 0,
    kids_pending = tonumber(v[4]) or 0, kids_incomplete = tonumber(v[5]) or 0,
    complete_at = v[6], success_at = v[7], parent = v[8], success_ttl = tonumber(v[9])}
end

-- Death: fire once per batch, and up its parents; the jobs waiting for success are taken
-- out of their list and appended to doomed as {text, reason} (lib/outcome.lua ends them).
local function batch_death(P, hash, jid, now, doomed)
  while hash do
    if not batch_read(hash) or redis.call('HSETNX', hash, 'death_at', now) == 0 then
      return
    end
    batch_callback(P, hash, 'death', now)
    redis.call('INCR', key_of(P, 'batch_counter', 'died'))
    local bid = redis.call('HGET', hash, 'bid') or ''
    local list = hash .. '-waiting-success'
    while true do
      local text = redis.call('RPOP', list)
      if not text then break end
      doomed[#doomed + 1] = {text = text, reason = 'batch ' .. bid .. ': job ' .. jid .. ' died'}
    end
    local parent = redis.call('HGET', hash, 'parent')
    hash = parent and batch_hash(P, parent) or nil
  end
end

-- Fire complete and success where due, on the batch (state s, or nil to read it) and up its
-- parents. Redis's TIME is read only when an event fires.
local function batch_settle(P, hash, s)
  local now = nil
  while hash do
    s = s or batch_read(hash)
    if not s then return end
    local completed = not s.complete_at and s.pending <= s.failures and s.kids_incomplete <= 0
    local succeeded = not s.success_at and s.pending <= 0 and s.kids_pending <= 0
    if not (completed or succeeded) then return end
    now = now or batch_time()
    if completed then
      redis.call('HSET', hash, 'complete_at', now)
      batch_callback(P, hash, 'complete', now)
      redis.call('INCR', key_of(P, 'batch_counter', 'completed'))
      batch_release(P, hash .. '-waiting-complete', now)
    end
    if succeeded then
      redis.call('HSET', hash, 'success_at', now)
      batch_callback(P, hash, 'success', now)
      redis.call('INCR', key_of(P, 'batch_counter', 'succeeded'))
      batch_release(P, hash .. '-waiting-success', now)
      batch_expire(hash, s.success_ttl or 86400)
    end
    if not s.parent then return end
    local parent = batch_hash(P, s.parent)
    if not batch_read(parent) then return end
    if completed then redis.call('HINCRBY', parent, 'kids_incomplete', -1) end
    if succeeded then redis.call('HINCRBY', parent, 'kids_pending', -1) end
    hash, s = parent, nil
  end
end

-- One job's outcome: 'ok' (acknowledged after success), 'fail' (retry set), 'dead' (dead
-- set or discarded); info: the failure's JSON. A batch that expired (or an unknown bid)
-- is left alone. A job counted before (it ran again after a recovery) changes nothing: the
-- replies of SADD (done, died), HSET and HDEL (failinfo) decide. The common case (a job
-- succeeds, nothing fires) costs HMGET, SADD, HINCRBY and HDEL. doomed: batch_death's.
local function batch_event(P, hash, jid, kind, info, doomed)
  local s = batch_read(hash)
  if not s then return end
  if kind == 'ok' then
    if redis.call('SADD', hash .. '-done', jid) == 0 then return end
    s.pending = redis.call('HINCRBY', hash, 'pending', -1)
    if redis.call('HDEL', hash .. '-failinfo', jid) == 1 then
      s.failures = redis.call('HINCRBY', hash, 'failures', -1)
    end
  else
    if redis.call('HSET', hash .. '-failinfo', jid, info) == 1 then
      s.failures = redis.call('HINCRBY', hash, 'failures', 1)
    end
    if kind == 'dead' and redis.call('SADD', hash .. '-died', jid) == 1 then
      batch_death(P, hash, jid, batch_time(), doomed)
    end
  end
  batch_settle(P, hash, s)
end

-- THE DEPENDENCY HOOK: a job (payload text, JSON object with a "queue") that must wait for
-- event 'success' or 'complete' of the batch at hash (Job.set(after=bid)). If the event has
-- fired, the job is pushed to its queue now ('pushed'); if it waits for success of a batch
-- that died, 'dead' and the reason (nothing written: the caller ends it); else it joins the
-- waiting list "b-<bid>-waiting-<event>" ('waiting'), with the batch's TTL, pushed by the
-- call that fires the event (or handed to job_end by the one that fires death). 'missing': no such batch (nothing
-- written). A script that calls it checks the hash is a hash and the list a list first.
local function batch_wait(P, hash, event, text, queue)
  local v = redis.call('HMGET', hash, 'bid', event .. '_at', 'death_at')
  if not v[1] then return 'missing' end
  if v[2] then
    batch_enqueue(P, text, queue)
    return 'pushed'
  end
  if event == 'success' and v[3] then
    return 'dead', 'batch ' .. v[1] .. ' died before it succeeded'
  end
  local list = hash .. '-waiting-' .. event
  redis.call('LPUSH', list, text)
  local ttl = redis.call('TTL', hash)
  if ttl > 0 then redis.call('EXPIRE', list, ttl) end
  return 'waiting'
end
