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
-- KEYS[4]: the namespace prefix P ("" or "<ns>:"), from which the record's keys are derived
--          (lib/keys.lua).
-- ARGV[1]: mode: "queue", "dead" or "delete".
-- ARGV[2]: the entry exactly as stored (what ZREM must match).
-- ARGV[3]: the payload to write (for "queue", with a fresh enqueued_at).
-- ARGV[4]: mode "queue": the queue name <q>; mode "dead": the score (time of death, float
--          epoch seconds).
-- ARGV[5]: mode "dead": trim entries scored below this (now - dead_timeout); "" for none.
-- ARGV[6]: mode "dead": the most entries to keep (dead_max_jobs); "" for no cap. The same
--          trimming as settle.lua.
-- ARGV[7]: the job's record (lib/record.lua; q is the payload's queue <gq>, "" when it has
--          none, and then the record has no ordering key, tenant or cap); "" for a plain
--          or invalid entry. Mode "queue" dispatches the job through the gate (the blocked
--          holder goes out; another keyed job waits its turn; a tenant job joins its
--          tenant's list; a capped job goes to its key's waiting list: a capped job in a
--          sorted set holds no slot; a job with a priority to its queue's priority set,
--          lib/priority.lua). Modes "dead" and "delete" end the job
--          (lib/outcome.lua: "died" and "deleted"): its key and unique lock released, so a
--          key blocked by a failed job is unblocked by killing or deleting it; a kill is
--          the job's death in its batch, in this same call.
-- ARGV[8]: mode "dead", a batched job: the failure's JSON {"error_class", "error_message"}.
-- Derived keys: the record's (lib/record.lua), a tenant's list "<ring key>|<tenant>"
--          (lib/gate.lua); a concurrency key's waiting list "<cap ring key>|<key>"
--          (lib/cap.lua); the batch's other keys, its parents', a callback's queue
--          (lib/batch.lua).
-- Every key written, and the score and trimming numbers of mode "dead", are checked before
-- the entry is removed (lib/guard.lua): one of another type changes nothing and is an error
-- reply, so the job stays in the source set.
-- Returns 1 if moved, 0 if the entry was no longer in the source set.
-- #include outcome
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return 0
end
local mode = ARGV[1]
local rec = record_of(KEYS[4], ARGV[7])
if not rec.jid then rec.key, rec.klist = nil, nil end  -- the gate needs the jid
local climit = tonumber(rec.limit or '')
if not (climit and climit >= 1) then rec.C = nil end
local G, ending = rec.G, ({dead = 'died', delete = 'deleted'})[mode]
local p = prio_of(rec.prio)
local w = wants_new()
want(w, KEYS[1], 'zset')
if ending then job_end_wants(w, rec, ending) end
if mode == 'queue' then
  if rec.C then
    cap_enter_wants(w, rec.C, rec.ck)
  elseif rec.key then
    gate_dispatch_wants(w, G, rec.klist, rec.tenant, p)
  elseif rec.tenant or p then
    gate_out_wants(w, G, rec.tenant, p)
  else
    want(w, KEYS[2], 'list')
    want(w, KEYS[3], 'set')
  end
elseif mode == 'dead' then
  want(w, KEYS[2], 'zset')
  if not finite(ARGV[4]) or (ARGV[5] ~= '' and not finite(ARGV[5]))
      or (ARGV[6] ~= '' and not finite(ARGV[6])) then
    return redis.error_reply('ERR api_move: score, trim or cap is not a number: nothing was changed')
  end
end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
redis.call('ZREM', KEYS[1], ARGV[2])
if mode == 'queue' then
  if rec.C then
    cap_enter(rec.C, rec.ck, math.floor(climit), ARGV[3], false)
    redis.call('SADD', KEYS[3], ARGV[4])
  elseif rec.key then
    gate_dispatch(G, rec.key, rec.klist, rec.jid, ARGV[3], rec.tenant, p)
  elseif rec.tenant then
    fair_send(G, rec.tenant, ARGV[3])
  elseif p then
    gate_out(G, ARGV[3], nil, false, p)
  else
    redis.call('LPUSH', KEYS[2], ARGV[3])
    redis.call('SADD', KEYS[3], ARGV[4])
    redis.call('PUBLISH', KEYS[2], '')  -- wakes idle workers of q (rfetch.worker.wake)
  end
  return 1
end
if mode == 'dead' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
  if ARGV[5] ~= '' then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[5])
  end
  if ARGV[6] ~= '' then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[6]) + 1))
  end
end
if ending then job_end(rec, ending, ARGV[2], {failure = ARGV[8] or ''}) end
return 1
