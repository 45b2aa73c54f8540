-- enqueue_due.lua: move due jobs from the scheduled or retry set to their queues, atomically
-- (Sidekiq Pro's reliable scheduler; OSS Sidekiq removes then pushes in two steps and can
-- lose a job in between). Called by rfetch.store.commands.Commands.enqueue_due only.
--
-- KEYS[1]: the sorted set: "schedule" or "retry".
-- KEYS[2]: the "queues" set.
-- KEYS[3]: the dead set, for entries that are not JSON objects with a "queue" string.
-- KEYS[4]: the namespace prefix P ("" or "<ns>:"), from which the keys of the queues named
--          by the jobs are derived (lib/keys.lua, through each job's record): the queue of
--          a job is known only once the script reads it, as in Sidekiq's own scheduler
--          script. With a "{tag}" namespace they share its Redis Cluster hash slot.
-- ARGV[1]: the most jobs to move in this call (Sidekiq moves one per call; we move 100).
-- No per-job argument: the jobs are read from KEYS[1], and each one's record
-- (lib/record.lua's record_of_job: q, jid, key, tenant, ck, limit, ...) is made from its
-- payload, so a per-job option is read where every script reads it.
-- Derived keys: "<P>queue:<q>", the key gate and fair-tenant keys of <q> (lib/gate.lua),
--          "<P>rfetch:key:<q>:<k>", a tenant's list, the cap keys of <q> (lib/cap.lua).
--
-- "Due" is decided by Redis's clock (TIME), so a worker whose clock is skewed neither delays
-- nor advances jobs. Each moved payload gets a fresh top-level "enqueued_at" (float epoch
-- seconds) by editing the JSON text in place, so every other byte, including large integers
-- and float arguments, is kept exactly as the producer wrote it.
-- A capped job (a "concurrency_key" string and a "concurrency_limit" number) joins its
-- key's waiting list (lib/cap.lua).
-- A job with an ordering key meets the key gate (lib/gate.lua) instead of a plain LPUSH:
-- the retry of a key's holder goes out again, any other keyed job waits its turn; a tenant
-- job joins its tenant's list; a job with a "priority" (lib/priority.lua) its queue's
-- priority set (derived keys "rfetch:prio:<q>", "rfetch:prio-queues"). No job ends here (an
-- entry that is not a job goes to the dead set as it is: it has no record).
-- Before a job is removed from the set, every key its move may write is checked
-- (lib/guard.lua): a job with a key of another type on its way stays in the set (it is
-- looked at again at the next poll) and the jobs behind it go on; at most 10 x ARGV[1] such
-- jobs are passed over per call.
-- Returns {moved, {message, ...}}: the number of jobs moved, and a WRONGTYPE message for
-- each job left in the set.
--
-- The first due jobs are read before the libraries are defined: a poll with nothing due
-- (most polls) returns before their prelude runs, so it costs no more than TIME and one
-- ZRANGEBYSCORE.

local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local limit = tonumber(ARGV[1])
local jobs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
if #jobs == 0 then return {0, {}} end
-- #include guard
-- #include record

-- Span (start, end) of the value of a top-level key of the JSON object text s, or nil.
local function top_level_value(s, name)
  local quoted = '"' .. name .. '"'
  local depth, i = 0, 1
  while true do
    local j = string.find(s, '[{}%[%]"]', i)
    if not j then return nil end
    local c = string.sub(s, j, j)
    if c == '"' then
      local k = j + 1
      while true do
        local q = string.find(s, '["\\]', k)
        if not q then return nil end
        if string.sub(s, q, q) == '\\' then k = q + 2 else k = q; break end
      end
      if depth == 1 and string.sub(s, j, k) == quoted then
        local vs, ve = string.find(s, '^%s*:%s*', k + 1)
        if vs then
          local ns, ne = string.find(s, '^[-+%deE%.]+', ve + 1)
          if ns then return ns, ne end
          local ls, le = string.find(s, '^null', ve + 1)
          if ls then return ls, le end
          return nil
        end
      end
      i = k + 1
    elseif c == '{' or c == '[' then
      depth = depth + 1
      i = j + 1
    else
      depth = depth - 1
      i = j + 1
    end
  end
end

local P = KEYS[4]
local moved, offset = 0, 0
local left = {}

-- Move one due job (removed from the set only once its way is checked); false if left.
local function move(job)
  local ok, decoded = pcall(cjson.decode, job)
  local w = wants_new()
  want(w, KEYS[1], 'zset')
  if ok and type(decoded) == 'table' and type(decoded['queue']) == 'string' then
    local rec = record_of_job(P, decoded)
    local G, C, t, p = rec.G, rec.C, rec.tenant, prio_of(rec.prio)
    local keyed = not C and rec.key and rec.jid
    if C then
      cap_enter_wants(w, C, rec.ck)
    elseif keyed then
      gate_dispatch_wants(w, G, rec.klist, t, p)
    else
      gate_out_wants(w, G, t, p)
    end
    want(w, KEYS[2], 'set')
    local bad = misfit(w)
    if bad then
      left[#left + 1] = bad
      return false
    end
    if redis.call('ZREM', KEYS[1], job) == 0 then return true end
    local s, e = top_level_value(job, 'enqueued_at')
    local out
    if s then
      out = string.sub(job, 1, s - 1) .. now .. string.sub(job, e + 1)
    else
      local brace = string.find(job, '{', 1, true)
      out = string.sub(job, 1, brace) .. '"enqueued_at":' .. now .. ',' .. string.sub(job, brace + 1)
    end
    if C then
      cap_enter(C, rec.ck, math.floor(tonumber(rec.limit)), out, false)
      redis.call('SADD', KEYS[2], rec.q)
    elseif keyed then
      gate_dispatch(G, rec.key, rec.klist, rec.jid, out, t, p)
    elseif t then
      fair_send(G, t, out)
    elseif p then
      gate_out(G, out, nil, false, p)
    else
      redis.call('LPUSH', G.queue, out)
      redis.call('PUBLISH', G.queue, '')  -- wakes idle workers of q (rfetch.worker.wake)
      redis.call('SADD', KEYS[2], rec.q)
    end
  else
    want(w, KEYS[3], 'zset')
    local bad = misfit(w)
    if bad then
      left[#left + 1] = bad
      return false
    end
    if redis.call('ZREM', KEYS[1], job) == 0 then return true end
    redis.call('ZADD', KEYS[3], now, job)
  end
  return true
end

while true do
  for _, job in ipairs(jobs) do
    if move(job) then
      moved = moved + 1
    else
      offset = offset + 1
    end
  end
  if moved >= limit or #left >= 10 * limit then break end
  jobs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', offset, limit - moved)
  if #jobs == 0 then break end
end
return {moved, left}
