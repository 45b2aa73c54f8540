-- recover.lua: push one job of a dead process back to its public queue, counting
-- recoveries per jid to catch poison pills (Sidekiq Pro 5.2). A live worker pushes back the
-- same way, counted with the same counter, a job on which rfetch itself failed.
-- Called by rfetch.store.commands.Commands.recover only.
--
-- KEYS[1]: the private list "queue:sq|<identity>|<q>" (of a dead process, or the caller's).
-- KEYS[2]: recovery counter of the job's jid "rfetch:recoveries:<jid>".
-- KEYS[3..9]: the seven gate keys of <q> (lib/gate.lua's G; KEYS[3] is the public queue
--          "queue:<q>", KEYS[4] the "queues" set).
-- KEYS[10] (a job with an ordering key only): the key's waiting list "rfetch:key:<q>:<k>".
-- ARGV[1]: the raw payload (exact bytes in the private list).
-- ARGV[2]: the queue name <q>.
-- ARGV[3]: recoveries that make a poison pill (3): this recovery is number count + 1;
--          0: not counted (a job its dead process held but had not started): pushed back
--          without reading or incrementing the counter.
-- ARGV[4]: the counting window in seconds (72 h); starts at the first recovery.
-- ARGV[5]: the job's jid ("" for none).
-- ARGV[6]: its ordering key ("" for none): it then goes back by the gate's push-back rule
--          (lib/gate.lua) instead of a plain RPUSH.
-- ARGV[7]: its tenant ("" for none): it then goes back to the head of its tenant's list.
-- ARGV[8] (optional): its concurrency key ("" for none): its slot is given back (this is
--          when a SIGKILLed holder's slot comes back) and it goes to the head of its key's
--          waiting list; the six cap keys of <q> (lib/cap.lua's C) then follow in KEYS
--          (from KEYS[10], or KEYS[11] after a key's waiting list).
-- Derived keys: a tenant's list "<ring key>|<tenant>" (lib/gate.lua); a concurrency key's
--          waiting list "<cap ring key>|<key>" (lib/cap.lua).
--
-- Returns "poison" (nothing changed: the caller moves the job to the dead set with
-- settle.lua, atomically), "gone" (no longer in the private list), or "requeued" (removed
-- from the private list, RPUSHed to the head of the queue so it runs next, queue re-added to
-- "queues" (Sidekiq #4706), counter incremented when counted) - all in one atomic step.
-- Every key written is checked first (lib/guard.lua): one of another type, or a counter
-- that is not an integer, changes nothing and is an error reply, so the job stays in the
-- private list.
-- #include guard
-- #include gate
-- #include cap
local counted = tonumber(ARGV[3]) > 0
if counted then
  local raw_count = redis.call('GET', KEYS[2])
  local count = 0
  if raw_count then
    count = tonumber(raw_count)
    if not count or not string.match(raw_count, '^%d+$') then
      return redis.error_reply('ERR ' .. KEYS[2] .. ' holds ' .. raw_count ..
        ', not a count: nothing was changed')
    end
  end
  if count + 1 >= tonumber(ARGV[3]) then
    return 'poison'
  end
end
local G = gate_keys(3, ARGV[2])
local k, jid, t = opt(ARGV[6]), opt(ARGV[5]), opt(ARGV[7])
local ck, C = opt(ARGV[8]), nil
if ck then C = cap_keys(k and 11 or 10, ARGV[2]) end
local w = wants_new()
want(w, KEYS[1], 'list')
if C then
  cap_push_back_wants(w, C, ck)
else
  gate_push_back_wants(w, G, k, KEYS[10], jid, t)
end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 'gone'
end
if C then
  cap_push_back(C, ck, ARGV[1])
elseif not gate_push_back(G, ARGV[1], k, KEYS[10], jid, t) then
  redis.call('RPUSH', G.queue, ARGV[1])
  redis.call('SADD', G.queues, ARGV[2])
end
if counted and redis.call('INCR', KEYS[2]) == 1 then
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
end
return 'requeued'
