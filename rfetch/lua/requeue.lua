-- requeue.lua: push fetched jobs back to the head of their public queue.
-- Called by rfetch.store.commands.Commands.requeue only.
--
-- KEYS[1]: private list "queue:sq|<identity>|<q>" the jobs were fetched into.
-- KEYS[2..8]: the seven gate keys of <q> (lib/gate.lua's G; KEYS[2] is the public queue
--          "queue:<q>", KEYS[3] the "queues" set).
-- KEYS[9..]: the waiting lists "rfetch:key:<q>:<k>" named by the records below.
-- ARGV[1]: the queue name <q> (re-added to "queues": Sidekiq #4706).
-- ARGV[2]: N, the number of jobs.
-- ARGV[3..]: N records of seven values, in the order the jobs should run next (the first
--          runs first): the raw payload, its jid ("" for none), its ordering key ("" for
--          none), its tenant ("" for none), the index in KEYS of its key's waiting list
--          (0 without an ordering key), its concurrency key ("" for none) and the index in
--          KEYS of the first of the six cap keys of <q> (lib/cap.lua's C; 0 for none).
-- Derived keys: a tenant's list "<ring key>|<tenant>" (lib/gate.lua); a concurrency key's
--          waiting list "<cap ring key>|<key>" (lib/cap.lua).
--
-- A capped job gives its slot back and goes to the head of its key's waiting list.
-- A job is pushed back only if it is still in the private list (LREM removed it), so a job
-- that was acknowledged, or moved to the retry or dead set, meanwhile is never pushed back
-- as well (Sidekiq #4112). RPUSH puts it at the right end: next to run (Sidekiq's
-- bulk_requeue). A job with an ordering key goes back by the gate's push-back rule
-- (gate_push_back: the holder to the head of the queue, a job not holding its key to the
-- head of the key's list), so order per key is kept; a tenant job to the head of its
-- tenant's list. Before a job is taken out of the private list, every key its push-back may
-- write is checked (lib/guard.lua): a job with a key of another type on its way stays in the
-- private list, and the others go on.
-- Returns {pushed, {position, message, ...}}: the number of jobs pushed back, and for each
-- job left in the private list its record's position (1-based) and the WRONGTYPE message.
-- #include guard
-- #include gate
-- #include cap
local G = gate_keys(2, ARGV[1])
local pushed = 0
local left = {}
for r = tonumber(ARGV[2]), 1, -1 do
  local at = 3 + 7 * (r - 1)
  local raw = ARGV[at]
  local k, list, jid, t = opt(ARGV[at + 2]), tonumber(ARGV[at + 4]), opt(ARGV[at + 1]), opt(ARGV[at + 3])
  local ck, ci = opt(ARGV[at + 5]), tonumber(ARGV[at + 6])
  local klist, C = nil, nil
  if list > 0 then klist = KEYS[list] end
  if ck and ci > 0 then C = cap_keys(ci, ARGV[1]) end
  local w = wants_new()
  want(w, KEYS[1], 'list')
  if C then
    cap_push_back_wants(w, C, ck)
  else
    gate_push_back_wants(w, G, k, klist, jid, t)
  end
  want(w, G.queues, 'set')
  local bad = misfit(w)
  if bad then
    left[#left + 1] = r
    left[#left + 1] = bad
  elseif redis.call('LREM', KEYS[1], 1, raw) == 1 then
    if C then
      cap_push_back(C, ck, raw)
    elseif not gate_push_back(G, raw, k, klist, jid, t) then
      redis.call('RPUSH', G.queue, raw)
    end
    pushed = pushed + 1
  end
end
if pushed > 0 then
  redis.call('SADD', G.queues, ARGV[1])
end
return {pushed, left}
