-- periodic_push.lua: push the job of one tick of one periodic schedule, at most once ever.
--
-- KEYS[1]: the leader hash "rfetch:leader".
-- KEYS[2]: the schedule's state hash "rfetch:periodic:<name>" (see periodic_sync.lua).
-- KEYS[3]: the tick's marker "rfetch:periodic-tick:<name>:<tick>", kept ARGV[4] seconds.
-- KEYS[4]: the public queue "queue:<q>".
-- KEYS[5]: the "queues" set.
-- ARGV[1]: the token of the process that believes it leads.
-- ARGV[2]: the tick, whole epoch seconds.
-- ARGV[3]: the schedule's catch-up window, seconds.
-- ARGV[4]: the marker's lifetime, seconds (longer than the window: after the window the
--          tick is refused as stale anyway).
-- ARGV[5]: the queue name, added to "queues".
-- ARGV[6]: the job's jid, kept in the marker and the state.
-- ARGV[7]: the job's payload (Sidekiq JSON with "periodic" and "tick" fields).
-- ARGV[8]: "1" when the tick is pushed late (caught up after a leaderless gap), else "0".
--
-- Checks, in order, each deciding alone: the token holds the lease (else 'lost': a frozen
-- leader whose lease ran out or was taken pushes nothing); the tick is after the cursor
-- (else 'done'); the tick is due by Redis's clock (else 'early'); it is at most the window
-- old (else 'stale'); its marker did not exist (else 'done': two processes that both believe
-- they lead cannot push one tick twice). Then the cursor moves to the tick, and unless the
-- schedule is paused ('paused') the job is LPUSHed like any job and the state records it
-- ('pushed'). The keys it writes are checked before its first write (lib/guard.lua): a
-- queue or "queues" key of another type changes nothing (no marker, the cursor stays) and is
-- an error reply, so the tick is tried again, instead of marked pushed with its job lost.
-- #include guard
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 'lost'
end
local tick = tonumber(ARGV[2])
local cursor = tonumber(redis.call('HGET', KEYS[2], 'cursor') or '')
if cursor and tick <= cursor then
  return 'done'
end
if tick > now then
  return 'early'
end
if now - tick > tonumber(ARGV[3]) then
  return 'stale'
end
local w = wants_new()
want(w, KEYS[2], 'hash')
want(w, KEYS[4], 'list')
want(w, KEYS[5], 'set')
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
if not redis.call('SET', KEYS[3], ARGV[6], 'NX', 'EX', ARGV[4]) then
  return 'done'
end
redis.call('HSET', KEYS[2], 'cursor', ARGV[2])
if redis.call('HGET', KEYS[2], 'paused') then
  return 'paused'
end
redis.call('LPUSH', KEYS[4], ARGV[7])
redis.call('PUBLISH', KEYS[4], '')  -- wakes idle workers of the queue (rfetch.worker.wake)
redis.call('SADD', KEYS[5], ARGV[5])
redis.call('HSET', KEYS[2], 'last_tick', ARGV[2], 'last_jid', ARGV[6],
  'last_pushed_at', t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
redis.call('HINCRBY', KEYS[2], 'pushed', 1)
if ARGV[8] == '1' then
  redis.call('HINCRBY', KEYS[2], 'caught_up', 1)
end
return 'pushed'
