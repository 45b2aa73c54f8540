-- coalesce.lua: take the waiting jobs of a key into the private list of its running holder,
-- so one execution handles them all (issue #5, coalesce=True / "last", as Lowkiq merges
-- payloads by id).
--
-- KEYS[1]: the holder's private list "queue:sq|<identity>|<q>".
-- ARGV[1]: namespace prefix P (see lib/gate.lua).
-- ARGV[2]: the queue name <q>.
-- ARGV[3]: the ordering key.
-- ARGV[4]: the holder's jid.
-- ARGV[5]: the most jobs to take.
--
-- Only if ARGV[4] still holds the key. The jobs move oldest first (LMOVE RIGHT LEFT, as a
-- fetch), so they stay in exactly one list: a crash leaves them in the private list, and
-- recovery returns them to the head of the key's list (they do not hold the key).
-- Returns the payloads taken, oldest first.
-- #include gate
if redis.call('HGET', gate_holders(ARGV[1], ARGV[2]), ARGV[3]) ~= ARGV[4] then
  return {}
end
local list = gate_list(ARGV[1], ARGV[2], ARGV[3])
local taken = {}
for _ = 1, tonumber(ARGV[5]) do
  local job = redis.call('LMOVE', list, KEYS[1], 'RIGHT', 'LEFT')
  if not job then break end
  taken[#taken + 1] = job
end
return taken
