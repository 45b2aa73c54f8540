-- push.lua: push jobs, all or none (Sidekiq's raw_push, made atomic): plain jobs (LPUSH to
-- their queue, or ZADD to "schedule" with their run time), and jobs with an ordering key, a
-- unique lock or a tenant through the gate (lib/gate.lua). Called by
-- rfetch.store.commands.Commands.push only.
--
-- KEYS[1]: the scheduled set "schedule".
-- KEYS[2 + 7(b-1) .. 8 + 7(b-1)] (b = 1..B): the seven gate keys of the b-th queue
--          (lib/gate.lua's G; the first is the public queue "queue:<q>").
-- Then the keys named by index in the records: a key's waiting list "rfetch:key:<q>:<k>",
--          a unique lock "rfetch:unique:<digest>".
-- ARGV[1]: B, the number of queues; ARGV[2 .. 1+B]: their names <q>, in block order.
-- ARGV[2+B]: N, the number of records; then N records, in push order:
--          "p", block b, count c, then c payloads: plain jobs of one queue to run now, in
--          push order (one LPUSH);
--          "s", block, payload, run time (float epoch s, the "schedule" score): a plain
--          scheduled job;
--          "g", block, payload, run time ("" for now), jid, index in KEYS of its key's
--          waiting list (0 for none), its ordering key ("" for none), index in KEYS of its
--          unique lock (0 for none), the lock's window in milliseconds, its tenant ("" for
--          none: else the job goes to its tenant's list, a fair queue), index in KEYS of
--          the first of the six cap keys of its queue (lib/cap.lua's C; 0 for none), its
--          concurrency key ("" for none) and that key's limit: a job through the gate (a
--          capped job to run now waits in its key's list until fetched by the cap ring);
--          "m", block, the queue's max_queue_size, the number of jobs of this call to run
--          now in that queue: a backpressure check (see below).
-- Derived keys: a tenant's list "<ring key>|<tenant>" (lib/gate.lua); a concurrency key's
--          waiting list "<cap ring key>|<key>" (lib/cap.lua).
--
-- Backpressure (max_queue_size): when a queue's public list holds so many jobs that this
-- call's jobs to run now would take it past its max, the whole call writes nothing and is an
-- error reply starting "QUEUEFULL" (rfetch.QueueFull); a scheduled job is not counted (it is
-- not in the queue).
--
-- All or none: every key that may be written, every run time and every window is checked
-- before the first write (lib/guard.lua), so a key of another type or a bad number changes
-- nothing and is an error reply (a MULTI/EXEC would write the jobs before the failing command
-- and raise: the caller would know none of their jids). Out of memory and READONLY are
-- refused at the first write, before anything is written.
-- A unique job whose lock is taken (also by an earlier job of this call) writes nothing
-- (Sidekiq Enterprise's unique jobs). A scheduled job goes to "schedule" and meets the gate
-- when it is due (enqueue_due.lua).
-- Returns the positions (1-based, in push order) of the jobs not written because their
-- unique lock was held; every other job was written.
-- #include guard
-- #include gate
-- #include cap
local B = tonumber(ARGV[1])
local G = {}
for b = 1, B do G[b] = gate_keys(2 + 7 * (b - 1), ARGV[1 + b]) end
local records = {}
local at = 3 + B
for i = 1, tonumber(ARGV[2 + B]) do
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
    j.text, j.at, j.jid = ARGV[at + 2], opt(ARGV[at + 3]), ARGV[at + 4]
    j.k, j.t, j.window = opt(ARGV[at + 6]), opt(ARGV[at + 9]), ARGV[at + 8]
    local ki, li = tonumber(ARGV[at + 5]), tonumber(ARGV[at + 7])
    if ki > 0 then j.klist = KEYS[ki] end
    if li > 0 then j.lock = KEYS[li] end
    local ci = tonumber(ARGV[at + 10])
    if ci > 0 then
      j.C, j.ck, j.limit = cap_keys(ci, j.G.q), ARGV[at + 11], tonumber(ARGV[at + 12])
    end
    at = at + 13
  end
  records[i] = j
end

local w = wants_new()
for _, j in ipairs(records) do
  if j.kind == 'm' then
    local size = redis.call('LLEN', j.G.queue)
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
    want(w, KEYS[1], 'zset')
  elseif j.C then
    cap_enter_wants(w, j.C, j.ck)
    want(w, j.G.queues, 'set')
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
  elseif j.kind ~= 'm' then
    n = n + 1
    if j.lock and not redis.call('SET', j.lock, j.jid, 'NX', 'PX', tonumber(j.window)) then
      refused[#refused + 1] = n
    elseif j.at then
      redis.call('ZADD', KEYS[1], j.at, j.text)
    elseif j.C then
      cap_enter(j.C, j.ck, j.limit, j.text, false)
      redis.call('SADD', j.G.queues, j.G.q)
    elseif j.k then
      gate_dispatch(j.G, j.k, j.klist, j.jid, j.text, j.t)
    else
      gate_out(j.G, j.text, j.t)
    end
  end
end
return refused
