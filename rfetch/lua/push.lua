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
--          none: else the job goes to its tenant's list, a fair queue): a job through the
--          gate.
-- Derived keys: a tenant's list "<ring key>|<tenant>" (lib/gate.lua).
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
  else
    j.text, j.at, j.jid = ARGV[at + 2], opt(ARGV[at + 3]), ARGV[at + 4]
    j.k, j.t, j.window = opt(ARGV[at + 6]), opt(ARGV[at + 9]), ARGV[at + 8]
    local ki, li = tonumber(ARGV[at + 5]), tonumber(ARGV[at + 7])
    if ki > 0 then j.klist = KEYS[ki] end
    if li > 0 then j.lock = KEYS[li] end
    at = at + 10
  end
  records[i] = j
end

local w = wants_new()
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
    want(w, KEYS[1], 'zset')
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
      redis.call('ZADD', KEYS[1], j.at, j.text)
    elseif j.k then
      gate_dispatch(j.G, j.k, j.klist, j.jid, j.text, j.t)
    else
      gate_out(j.G, j.text, j.t)
    end
  end
end
return refused
