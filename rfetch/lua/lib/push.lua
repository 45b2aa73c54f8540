-- #include guard
-- #include keys
-- #include gate
-- #include cap
-- #include record
-- lib/push.lua: push.lua's body, shared with batch_push.lua (which registers the jobs
-- in a batch in the same call) and push_once.lua. Included with "-- #include push".
--
-- push_jobs(K, A, extra): push.lua's KEYS start at KEYS[K + 1] and its ARGV at ARGV[A + 1]
-- (its header gives their layout); a job through the gate carries its record
-- (lib/record.lua), whose keys are derived from the prefix KEYS[K + 2]; extra:
-- the caller's own wants (lib/guard.lua), checked with the jobs' before the first write, or
-- nil. Returns the refused positions (push.lua's reply) or an error reply (nothing written).
local function push_jobs(K, A, extra)
  local B = tonumber(ARGV[A + 1])
  local P = KEYS[K + 2]
  local G = {}
  for b = 1, B do G[b] = gate_keys(K + 3 + 7 * (b - 1), ARGV[A + 1 + b]) end
  local records = {}
  local at = A + 3 + B
  for i = 1, tonumber(ARGV[A + 2 + B]) do
    local j = {kind = ARGV[at], G = G[tonumber(ARGV[at + 1])]}
    if j.kind == 'p' then
      j.first, j.count = at + 3, tonumber(ARGV[at + 2])
      at = at + 3 + j.count
    elseif j.kind == 's' then
      j.text, j.at = ARGV[at + 2], ARGV[at + 3]
      at = at + 4
    elseif j.kind == 'm' then
      j.max, j.incoming = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
      at = at + 4
    else
      j.text, j.at = ARGV[at + 2], opt(ARGV[at + 3])
      local rec = record_of(P, ARGV[at + 4], j.G.q)
      j.jid, j.k, j.klist, j.t = rec.jid or '', rec.key, rec.klist, rec.tenant
      j.lock, j.window, j.p = rec.lock, rec.win or '', prio_of(rec.prio)
      if rec.C and not j.at then  -- a scheduled capped job meets its cap when due
        j.C, j.ck, j.limit = rec.C, rec.ck, tonumber(rec.limit or '')
      end
      at = at + 5
    end
    records[i] = j
  end

  local w = extra or wants_new()
  for _, j in ipairs(records) do
    if j.kind == 'm' then
      local size = redis.call('LLEN', j.G.queue) + prio_size(j.G)
      if size + j.incoming > j.max then
        return redis.error_reply('QUEUEFULL queue ' .. j.G.q .. ' holds ' .. size ..
          ' jobs; ' .. j.incoming .. ' more would pass its max_queue_size of ' .. j.max ..
          ': nothing was written')
      end
    end
  end
  for i, j in ipairs(records) do
    if j.C and not (j.limit and j.limit >= 1) then
      return redis.error_reply('ERR push: concurrency limit of record ' .. i ..
        ' is not a positive number: nothing was written')
    end
    if j.at and not finite(j.at) then
      return redis.error_reply('ERR push: run time ' .. j.at .. ' of record ' .. i ..
        ' is not a number: nothing was written')
    end
    if j.lock and not (finite(j.window) and tonumber(j.window) >= 1
        and math.floor(tonumber(j.window)) == tonumber(j.window)) then
      return redis.error_reply('ERR push: unique window ' .. j.window .. ' of record ' .. i ..
        ' is not a number of milliseconds: nothing was written')
    end
    if j.lock then want(w, j.lock, 'string') end
    if j.kind == 'm' then  -- a size check, done above: writes nothing
    elseif j.at then
      want(w, KEYS[K + 1], 'zset')
    elseif j.C then
      cap_enter_wants(w, j.C, j.ck)
      want(w, j.G.queues, 'set')
    elseif j.kind == 'p' then
      gate_out_wants(w, j.G, nil)
    elseif j.k then
      gate_dispatch_wants(w, j.G, j.klist, j.t, j.p)
    else
      gate_out_wants(w, j.G, j.t, j.p)
    end
  end
  local bad = misfit(w)
  if bad then return redis.error_reply(bad) end

  local refused, n = {}, 0  -- n: jobs handled so far, in push order
  for _, j in ipairs(records) do
    if j.kind == 'p' then
      local last = j.first + j.count - 1
      for from = j.first, last, 1000 do
        redis.call('LPUSH', j.G.queue, unpack(ARGV, from, math.min(from + 999, last)))
      end
      redis.call('SADD', j.G.queues, j.G.q)
      redis.call('PUBLISH', j.G.queue, '')  -- wakes idle workers of q (rfetch.worker.wake)
      n = n + j.count
    elseif j.kind ~= 'm' then
      n = n + 1
      if j.lock and not redis.call('SET', j.lock, j.jid, 'NX', 'PX', tonumber(j.window)) then
        refused[#refused + 1] = n
      elseif j.at then
        redis.call('ZADD', KEYS[K + 1], j.at, j.text)
      elseif j.C then
        cap_enter(j.C, j.ck, j.limit, j.text, false)
        redis.call('SADD', j.G.queues, j.G.q)
      elseif j.k then
        gate_dispatch(j.G, j.k, j.klist, j.jid, j.text, j.t, j.p)
      else
        gate_out(j.G, j.text, j.t, false, j.p)
      end
    end
  end
  return refused
end
