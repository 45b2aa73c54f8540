-- push_plain.lua: push plain jobs of one queue to run now: the common case of push.lua
-- (a perform_async with no ordering key, unique lock, tenant, fetch cap, priority, run time
-- or max_queue_size), with the same writes and the same replies, and none of push.lua's
-- record parsing or gate keys. Called by rfetch.store.commands.Commands.push only, which
-- sends every other push to push.lua.
--
-- KEYS[1]: the public queue "queue:<q>".
-- KEYS[2]: the set of queue names "queues".
-- ARGV[1]: the queue name <q>.
-- ARGV[2 .. 1+N]: N payloads (1 <= N <= 1000), in push order (one LPUSH, as push.lua's
--          "p" record).
--
-- Writes, as push.lua: LPUSH of the payloads to KEYS[1], SADD of <q> to KEYS[2] (Sidekiq's
-- raw_push), PUBLISH on the channel KEYS[1] (wakes idle workers of <q>: rfetch.worker.wake).
-- All or none: the SADD goes first, so a "queues" of another type refuses the call before any
-- write; an LPUSH refused (a queue key of another type) takes back the name the SADD added,
-- so nothing is changed. Either is the same WRONGTYPE error reply as push.lua's guard
-- (lib/guard.lua). Out of memory and READONLY are refused at the first write (the SADD).
-- Returns an empty array: no job refused (push.lua's reply when no unique lock was held).

-- #include guard

-- The guard's WRONGTYPE message (lib/guard.lua's misfit) for key, which must be of type kind.
local function misfit_reply(key, kind)
  local w = wants_new()
  want(w, key, kind)
  return redis.error_reply(misfit(w))
end

local added = redis.pcall('SADD', KEYS[2], ARGV[1])
if type(added) == 'table' then
  if string.find(added['err'], 'WRONGTYPE') then return misfit_reply(KEYS[2], 'set') end
  return added
end
local pushed = redis.pcall('LPUSH', KEYS[1], unpack(ARGV, 2))
if type(pushed) == 'table' then
  if added == 1 then redis.call('SREM', KEYS[2], ARGV[1]) end
  if string.find(pushed['err'], 'WRONGTYPE') then return misfit_reply(KEYS[1], 'list') end
  return pushed
end
redis.call('PUBLISH', KEYS[1], '')
return {}
