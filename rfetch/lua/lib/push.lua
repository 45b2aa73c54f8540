-- lib/push.lua: push.lua's body, shared with batch_push.lua (which registers the jobs
-- in a batch in the same call). Included with "-- #include push" after guard and gate.
--
-- push_jobs(K, A, extra): push.lua's KEYS start at KEYS[K + 1] and its ARGV at ARGV[A + 1]
-- (its header gives their layout; key indexes in records count from KEYS[K + 1]); extra:
-- the caller's own wants (lib/guard.lua), checked with the jobs' before the first write, or
-- nil. Returns the refused positions (push.lua's reply) or an error reply (nothing written).
local function push_jobs(K, A, extra)
  local B = tonumber(ARGV[A + 1])
  local G = {}
  for b = 1, B do G[b] = gate_keys(K + 2 + 7 * (b - 1), ARGV[A + 1 + b]) end
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
    else
      j.text, j.at, j.jid = ARGV[at + 2], opt(ARGV[at + 3]), ARGV[at + 4]
      j.k, j.t, j.window = opt(ARGV[at + 6]), opt(ARGV[at + 9]), ARGV[at + 8]
      local ki, li = tonumber(ARGV[at + 5]), tonumber(ARGV[at + 7])
      if ki > 0 then j.klist = KEYS[K + ki] end
      if li > 0 then j.lock = KEYS[K + li] end
      at = at + 10
    end
    records[i] = j
  end

  local w = extra or wants_new()
  for i, j in ipairs(records) do
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
    if j.at then
      want(w, KEYS[K + 1], 'zset')
    elseif j.kind == 'p' then
      gate_out_wants(w, j.G, nil)
    elseif j.k then
      gate_dispatch_wants(w, j.G, j.klist, j.t)
    else
      gate_out_wants(w, j.G, j.t)
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
      n = n + j.count
    else
      n = n + 1
      if j.lock and not redis.call('SET', j.lock, j.jid, 'NX', 'PX', tonumber(j.window)) then
        refused[#refused + 1] = n
      elseif j.at then
        redis.call('ZADD', KEYS[K + 1], j.at, j.text)
      elseif j.k then
        gate_dispatch(j.G, j.k, j.klist, j.jid, j.text, j.t)
      else
        gate_out(j.G, j.text, j.t)
      end
    end
  end
  return refused
end
