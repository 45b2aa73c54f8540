-- api_move.lua: move one job out of a sorted set (schedule, retry or dead) for an admin
-- action of rfetch.api: "retry now" / "add to queue" (to its queue) or "kill" (to the dead
-- set). The removal and the write are one atomic step, and the write happens only if this
-- call removed the entry: a job the poller (or another admin) moved meanwhile is not pushed
-- twice. Called by rfetch.store.commands.Commands.api_move only.
--
-- KEYS[1]: the source sorted set.
-- KEYS[2]: the destination: the public queue "queue:<q>" (mode "queue") or the dead set
--          (mode "dead"); unused by mode "delete".
-- KEYS[3]: the "queues" set (mode "queue"; SADD as every push does).
-- KEYS[4..10] (a job with an ordering key, a unique lock or a tenant only): the seven gate
--          keys of its queue <gq> (lib/gate.lua's G), then its key's waiting list
--          "rfetch:key:<gq>:<k>" if it has an ordering key, then its unique lock
--          "rfetch:unique:<digest>" if it has one.
-- ARGV[1]: mode: "queue", "dead" or "delete".
-- ARGV[2]: the entry exactly as stored (what ZREM must match).
-- ARGV[3]: the payload to write (for "queue", with a fresh enqueued_at).
-- ARGV[4]: mode "queue": the queue name <q>; mode "dead": the score (time of death, float
--          epoch seconds).
-- ARGV[5]: mode "dead": trim entries scored below this (now - dead_timeout); "" for none.
-- ARGV[6]: mode "dead": the most entries to keep (dead_max_jobs); "" for no cap. The same
--          trimming as settle.lua.
-- ARGV[7..11] (with KEYS[4..] only): the payload's queue <gq>, ordering key, jid, unique
--          digest and tenant ("" for none). The job then keeps the key gate consistent:
--          mode "queue" dispatches it through the gate (the blocked holder goes out;
--          another keyed job waits its turn; a tenant job joins its tenant's list), mode
--          "dead" and mode "delete" (remove only) release its key and its unique lock, so a
--          key blocked by a failed job is unblocked by retrying or deleting it.
-- ARGV[12], ARGV[13] (optional): the payload's concurrency key ("" for none) and its limit;
--          with a key, the six cap keys of <gq> (lib/cap.lua's C) follow the job's keys in
--          KEYS, and mode "queue" sends the job to its key's waiting list (a capped job in
--          a sorted set holds no slot).
-- ARGV[14..16] (mode "dead", a batched job only; ARGV[7..13] and the gate keys are then
--          always passed): "dead", the jid, the failure's JSON {"error_class",
--          "error_message"}; after the job's keys and the cap keys, KEYS[next]: its batch
--          hash "b-<bid>", KEYS[next + 1]: the namespace prefix P. A kill is the job's
--          death in its batch (lib/batch.lua), in this same call.
-- Derived keys: a tenant's list "<ring key>|<tenant>" (lib/gate.lua); a concurrency key's
--          waiting list "<cap ring key>|<key>" (lib/cap.lua); the batch's other keys, its
--          parents', a callback's queue (lib/batch.lua).
-- Every key written, and the score and trimming numbers of mode "dead", are checked before
-- the entry is removed (lib/guard.lua): one of another type changes nothing and is an error
-- reply, so the job stays in the source set.
-- Returns 1 if moved, 0 if the entry was no longer in the source set.
-- #include guard
-- #include gate
-- #include cap
-- #include workflow
-- #include batch
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return 0
end
local G, k, jid, t, klist, lock, C, ck, climit = nil, nil, nil, nil, nil, nil, nil, nil, nil
local next_key = 4
if ARGV[7] then
  G = gate_keys(4, ARGV[7])
  k, jid, t = opt(ARGV[8]), opt(ARGV[9]), opt(ARGV[11])
  if not jid then k = nil end
  klist, lock, next_key = job_keys(11, opt(ARGV[8]), opt(ARGV[10]))
  ck, climit = opt(ARGV[12]), tonumber(ARGV[13] or '')
  if ck and climit and climit >= 1 then
    C = cap_keys(next_key, ARGV[7])
    next_key = next_key + 6
  end
end
local bhash = ARGV[1] == 'dead' and opt(ARGV[14]) and KEYS[next_key]
local w = wants_new()
want(w, KEYS[1], 'zset')
if ARGV[1] ~= 'queue' and jid then
  if k then gate_release_wants(w, G, klist) end
  if lock then unique_release_wants(w, lock) end
end
if ARGV[1] == 'queue' then
  if C then
    cap_enter_wants(w, C, ck)
  elseif k then
    gate_dispatch_wants(w, G, klist, t)
  elseif t then
    gate_out_wants(w, G, t)
  else
    want(w, KEYS[2], 'list')
    want(w, KEYS[3], 'set')
  end
elseif ARGV[1] == 'dead' then
  want(w, KEYS[2], 'zset')
  if not finite(ARGV[4]) or (ARGV[5] ~= '' and not finite(ARGV[5]))
      or (ARGV[6] ~= '' and not finite(ARGV[6])) then
    return redis.error_reply('ERR api_move: score, trim or cap is not a number: nothing was changed')
  end
end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
redis.call('ZREM', KEYS[1], ARGV[2])
if ARGV[1] ~= 'queue' and jid then
  if k then gate_release(G, k, klist, jid) end
  if lock then unique_release(lock, jid) end
end
if ARGV[1] == 'delete' then
  return 1
end
if ARGV[1] == 'queue' then
  if C then
    cap_enter(C, ck, math.floor(climit), ARGV[3], false)
    redis.call('SADD', KEYS[3], ARGV[4])
  elseif k then
    gate_dispatch(G, k, klist, jid, ARGV[3], t)
  elseif t then
    fair_send(G, t, ARGV[3])
  else
    redis.call('LPUSH', KEYS[2], ARGV[3])
    redis.call('SADD', KEYS[3], ARGV[4])
  end
else
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
  if ARGV[5] ~= '' then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[5])
  end
  if ARGV[6] ~= '' then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[6]) + 1))
  end
  if bhash then batch_event(KEYS[next_key + 1], bhash, ARGV[15], 'dead', ARGV[16]) end
end
return 1
