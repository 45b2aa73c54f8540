-- rescue.lua: release a stuck ordering key: its holder's lease expired and the caller found
-- the holder in no private list. Called by rfetch.store.commands.Commands.rescue only.
--
-- KEYS[1]: the namespace prefix P ("" or "<ns>:"), from which the record's keys are derived
--          (lib/keys.lua).
-- ARGV[1]: the vanished holder's record (lib/record.lua: q, jid, key), its lease
--          "<jid>:<key>".
-- ARGV[2]: grace in seconds: the lease must have expired at least this long ago.
-- Derived keys: the gate keys of <q> (lib/gate.lua's G), the key's waiting list
--          "rfetch:key:<q>:<k>", a tenant's list for the key's next job.
--
-- A lease whose jid no longer holds the key is stale (its job finished, or was pushed back
-- or settled, after its heartbeat wrote it): it is removed and nothing else changes.
-- Otherwise the key is released only if its lease is still expired by Redis's clock, so a
-- holder renewed meanwhile is left alone. Only the key is released: the holder is in no
-- list, so no job ends here (its unique lock and batch are left as they are). Every key
-- the release may write is checked first (lib/guard.lua): one of another type changes
-- nothing and is an error reply.
-- Returns 1 if released, 0 if not.
-- #include guard
-- #include record
local rec = record_of(KEYS[1], ARGV[1])
local k, jid = rec.key, rec.jid
if not k or not jid then return 0 end
local G = rec.G
local member = gate_lease_member(k, jid)
local expiry = redis.call('ZSCORE', G.leases, member)
if not expiry then return 0 end
if redis.call('HGET', G.holders, k) ~= jid then
  redis.call('ZREM', G.leases, member)
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if tonumber(expiry) + tonumber(ARGV[2]) > now then return 0 end
local w = wants_new()
gate_release_wants(w, G, rec.klist)
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
return gate_release(G, k, rec.klist, jid)
