-- coalesce.lua: take the waiting jobs of a key into the private list of its running holder,
-- so one execution handles them all (coalescing, coalesce=True / "last", as Lowkiq merges
-- payloads by id). Called by rfetch.store.commands.Commands.coalesce only.
--
-- KEYS[1]: the holder's private list "queue:sq|<identity>|<q>".
-- KEYS[2]: the key holders hash "rfetch:key-holders:<q>".
-- KEYS[3]: the key's waiting list "rfetch:key:<q>:<k>".
-- ARGV[1]: the ordering key <k>.
-- ARGV[2]: the holder's jid.
-- ARGV[3]: the most jobs to take.
--
-- Only if ARGV[2] still holds the key. The jobs move oldest first (LMOVE RIGHT LEFT, as a
-- fetch), so they stay in exactly one list: a crash leaves them in the private list, and
-- recovery returns them to the head of the key's list (they do not hold the key).
-- A key of another type fails the first LMOVE (which checks both its keys before moving
-- anything), so an error never comes after a write. Returns the payloads taken, oldest
-- first.
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return {}
end
local taken = {}
for _ = 1, tonumber(ARGV[3]) do
  local job = redis.call('LMOVE', KEYS[3], KEYS[1], 'RIGHT', 'LEFT')
  if not job then break end
  taken[#taken + 1] = job
end
return taken
