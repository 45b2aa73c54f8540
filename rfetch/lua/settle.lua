-- settle.lua: take a failed job out of the private list and into the retry or dead set.
-- Called by rfetch.store.commands.Commands.settle only.
--
-- KEYS[1]: private list "queue:sq|<identity>|<q>" holding the fetched payload.
-- KEYS[2]: the sorted set to write: "retry" or "dead".
-- KEYS[3..9] (a job with an ordering key or a unique lock only): the seven gate keys of <q>
--          (lib/gate.lua's G), then its key's waiting list "rfetch:key:<q>:<k>" if it has
--          an ordering key, then its unique lock "rfetch:unique:<digest>" if it has one.
-- ARGV[1]: the raw payload as fetched (what LREM must match).
-- ARGV[2]: score: next retry time, or time of death (float epoch seconds).
-- ARGV[3]: the payload to store (with retry_count, error_message, ...).
-- ARGV[4]: for the dead set, trim entries scored below this (now - 180 days); "" for none.
-- ARGV[5]: for the dead set, the most entries to keep (10,000); "" for no cap.
-- ARGV[6..10] (with KEYS[3..] only): outcome, queue <q>, ordering key ("" for none), jid,
--          unique digest ("" for none). Outcome "retry": the job keeps its key blocked
--          (strict order survives retries; its lease is dropped, it is visible in the retry
--          set); "skip": the key is released now (the class's skip policy); "dead": the key
--          is released and the unique lock dropped (dead set, or discarded).
--          A batched job that has neither passes ARGV[6..10] as "".
-- ARGV[11] (optional): concurrency key ("" for none); then KEYS after the job's keys hold
--          the six cap keys of <q> (lib/cap.lua's C), and the job's slot is given back
--          whatever the outcome (a retry meets the cap again when it is due).
-- Then, for a batched job only (lib/batch.lua; ARGV[11] is then always given): after the
--          job's keys and the cap keys, KEYS[next]: its batch hash "b-<bid>", KEYS[next + 1]:
--          the namespace prefix P; ARGV[12]: "fail" (retry set) or "dead", ARGV[13]: jid,
--          ARGV[14]: the failure's JSON {"error_class", "error_message"}.
-- Derived keys: the batch's other keys and its parents' (lib/batch.lua), a callback's queue.
--
-- The write and the acknowledgement are one atomic step, and happen only if the job is still
-- in the private list: a job that was pushed back by shutdown or recovery meanwhile is not
-- also put in the retry set (Sidekiq #4112). Every key written and the score are checked
-- first (lib/guard.lua): a sorted set of another type, or a score that is not a number,
-- changes nothing and is an error reply, so the job stays in the private list.
-- The batch's counters change in this same call, only when the job was removed (a job
-- settled twice, after a recovery, counts once).
-- Returns 1 if written, 0 if the job was no longer ours.
-- #include guard
-- #include gate
-- #include cap
-- #include workflow
-- #include batch
local w = wants_new()
want(w, KEYS[1], 'list')
want(w, KEYS[2], 'zset')
local G, k, jid, klist, lock, outcome, C = nil, nil, nil, nil, nil, nil, nil
local next_key = 3
if opt(ARGV[6]) then
  outcome, k, jid = ARGV[6], opt(ARGV[8]), ARGV[9]
  G = gate_keys(3, ARGV[7])
  klist, lock, next_key = job_keys(10, k, opt(ARGV[10]))
  if opt(ARGV[11]) then
    C = cap_keys(next_key, ARGV[7])
    cap_release_wants(w, C)
    next_key = next_key + 6
  end
  if k then
    if outcome == 'retry' then want(w, G.leases, 'zset') else gate_release_wants(w, G, klist) end
  end
  if outcome == 'dead' and lock then unique_release_wants(w, lock) end
end
local bhash = opt(ARGV[12]) and KEYS[next_key]
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
if not finite(ARGV[2]) or (ARGV[4] ~= '' and not finite(ARGV[4]))
    or (ARGV[5] ~= '' and not finite(ARGV[5])) then
  return redis.error_reply('ERR settle: score ' .. ARGV[2] .. ', trim ' .. ARGV[4] .. ' or cap ' ..
    ARGV[5] .. ' is not a number: nothing was changed')
end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[5]) + 1))
end
if G then
  if k then
    if outcome == 'retry' then
      redis.call('ZREM', G.leases, gate_lease_member(k, jid))
    else
      gate_release(G, k, klist, jid)
    end
  end
  if outcome == 'dead' and lock then unique_release(lock, jid) end
  if C then cap_release(C, ARGV[11], ARGV[1]) end
end
if bhash then batch_event(KEYS[next_key + 1], bhash, ARGV[13], ARGV[12], ARGV[14]) end
return 1
