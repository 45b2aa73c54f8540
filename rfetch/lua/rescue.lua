-- rescue.lua: release a stuck ordering key (issue #5): its holder's lease expired and the
-- caller found the holder in no private list.
--
-- KEYS: none (computed from ARGV[1], see lib/gate.lua).
-- ARGV[1]: namespace prefix P.
-- ARGV[2]: the queue name <q>.
-- ARGV[3]: the ordering key.
-- ARGV[4]: the jid of the lease ("<jid>:<key>").
-- ARGV[5]: grace in seconds: the lease must have expired at least this long ago.
--
-- A lease whose jid no longer holds the key is stale (its job finished, or was pushed back
-- or settled, after its heartbeat wrote it): it is removed and nothing else changes.
-- Otherwise the key is released only if its lease is still expired by Redis's clock, so a
-- holder renewed meanwhile is left alone. Returns 1 if released, 0 if not.
-- #include gate
local P, q, k, jid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local leases, member = gate_leases(P, q), gate_lease_member(k, jid)
local expiry = redis.call('ZSCORE', leases, member)
if not expiry then return 0 end
if redis.call('HGET', gate_holders(P, q), k) ~= jid then
  redis.call('ZREM', leases, member)
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if tonumber(expiry) + tonumber(ARGV[5]) > now then return 0 end
return gate_release(P, q, k, jid)
