-- coalesce.lua: take the waiting jobs of a key into the private list of its running holder,
-- so one execution handles them all (coalescing, coalesce=True / "last", as Lowkiq merges
-- payloads by id). Called by rfetch.store.commands.Commands.coalesce only.
--
-- KEYS[1]: the holder's private list "queue:sq|<identity>|<q>".
-- KEYS[2]: the namespace prefix P ("" or "<ns>:"), from which the record's keys are derived
--          (lib/keys.lua).
-- ARGV[1]: the holder's record (lib/record.lua: q, jid, key).
-- ARGV[2]: the most jobs to take.
-- Derived keys: the key holders hash "rfetch:key-holders:<q>" and the key's waiting list
--          "rfetch:key:<q>:<k>" (the record's G.holders and klist).
--
-- Only if the record's jid still holds its key. The jobs move oldest first (LMOVE RIGHT
-- LEFT, as a fetch), so they stay in exactly one list: a crash leaves them in the private
-- list, and recovery returns them to the head of the key's list (they do not hold the key).
-- No job ends here. A key of another type fails the first LMOVE (which checks both its
-- keys before moving anything), so an error never comes after a write. Returns the
-- payloads taken, oldest first.
-- #include guard
-- #include record
local rec = record_of(KEYS[2], ARGV[1])
if not rec.key or not rec.jid or redis.call('HGET', rec.G.holders, rec.key) ~= rec.jid then
  return {}
end
local taken = {}
for _ = 1, tonumber(ARGV[2]) do
  local job = redis.call('LMOVE', rec.klist, KEYS[1], 'RIGHT', 'LEFT')
  if not job then break end
  taken[#taken + 1] = job
end
return taken
