-- #include keys
-- lib/workflow.lua: recorded outcomes (store_result) and the release of waiting jobs
-- (after=), for lib/outcome.lua's job_end (which ends a waiting job that will never run)
-- and depend.lua. Included by lib/outcome.lua.
--
-- W is the table of a call's fixed keys: W.P the namespace prefix, W.waiting the index
-- "rfetch:waiting", W.dead the dead set, W.queues the "queues" set, W.cancelled the counter
-- "rfetch:deps-cancelled", W.stored the counter "rfetch:results-stored".
-- Derived keys (of jobs named by the waiting payloads, known only once read, as
-- enqueue_due.lua's queues): "<P>queue:<q>", "<P>rfetch:dependents:<jid>",
-- "<P>rfetch:result:<jid>", "<P>rfetch:result-wake:<jid>". With a "{tag}" namespace they
-- share its Redis Cluster hash slot.

-- The fixed keys of a call, derived from the prefix (for lib/outcome.lua, whose callers do
-- not all pass them).
local function wf_keys(P)
  return {P = P, waiting = key_of(P, 'waiting'), dead = key_of(P, 'dead'),
          queues = key_of(P, 'queues'), cancelled = key_of(P, 'deps_cancelled'),
          stored = key_of(P, 'results_stored')}
end

local function wf_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- A top-level number field of a payload's JSON text, or nil.
local function wf_field(text, name)
  local ok, job = pcall(cjson.decode, text)
  if not ok or type(job) ~= 'table' then return nil end
  return job[name]
end

-- Write the record of jid (status and its fields), kept ttl seconds, and wake rfetch.result.
-- Both keys are replaced whatever they held (DEL first), so no type check is needed; the
-- counter is advisory (pcall: a counter of another type changes nothing else).
local function wf_record(W, jid, ttl, fields)
  local rec, wake = key_of(W.P, 'result', jid), key_of(W.P, 'result_wake', jid)
  redis.call('DEL', rec, wake)
  redis.call('HSET', rec, unpack(fields))
  redis.call('EXPIRE', rec, ttl)
  redis.call('RPUSH', wake, '1')
  redis.call('EXPIRE', wake, ttl)
  redis.pcall('INCR', W.stored)
end

-- The payload text with the error fields of a job that will never run (its dependency died,
-- or it was cancelled while waiting), every other byte kept as the producer wrote it.
local function wf_buried(text, class, reason, now)
  return string.sub(text, 1, -2) .. ',"error_class":' .. cjson.encode(class) ..
    ',"error_message":' .. cjson.encode(reason) .. ',"failed_at":' ..
    string.format('%.6f', now) .. '}'
end

-- Release the jobs waiting on jid, which ended with status ("succeeded", "dead" or
-- "cancelled"; why: the text of a death, as "was dead (...)"). A waiting job that runs
-- goes to its queue; one that asks for success of a dependency that did not succeed is
-- taken out of the dependents hash and appended to doomed as {jid, text, reason}: it will
-- never run, and lib/outcome.lua's job_end ends it (its death, record and batch, and the
-- jobs waiting on it in turn: a chain's tail). A waiting job whose queue key holds another
-- type stays waiting. Returns the number of jobs taken out (released or doomed).
local function wf_release(W, jid, status, why, doomed)
  local dkey = key_of(W.P, 'dependents', jid)
  local entries = {}
  if redis.call('TYPE', dkey)['ok'] == 'hash' then entries = redis.call('HGETALL', dkey) end
  local released = 0
  for i = 1, #entries, 2 do
    local wjid, text = entries[i], entries[i + 1]
    local q = wf_field(text, 'queue')
    local runs = status == 'succeeded' or wf_field(text, 'after_outcome') == 'complete'
    local target = runs and type(q) == 'string' and key_of(W.P, 'queue', q) or nil
    local ttype = target and redis.call('TYPE', target)['ok'] or 'none'
    if ttype == 'none' or ttype == 'list' then
      redis.call('HDEL', dkey, wjid)
      redis.call('HDEL', W.waiting, wjid)
      released = released + 1
      if target then
        redis.call('LPUSH', target, text)
        redis.call('PUBLISH', target, '')  -- wakes idle workers of q (rfetch.worker.wake)
        redis.call('SADD', W.queues, q)
      else
        doomed[#doomed + 1] = {jid = wjid, text = text, reason = 'dependency ' .. jid .. ' ' .. why}
      end
    end
  end
  return released
end
