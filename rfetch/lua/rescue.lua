-- rescue.lua: release a stuck ordering key (issue #5): its holder's lease expired and the
-- caller found the holder in no private list.
--
-- KEYS: none (computed from ARGV[1], see lib/gate.lua).
-- ARGV[1]: namespace prefix P.
-- ARGV[2]: the queue name <q>.
-- ARGV[3]: the ordering key.
-- ARGV[4]: the jid the caller saw holding it.
-- ARGV[5]: grace in seconds: the lease must have expired at least this long ago.
--
-- Released only if the same jid still holds the key and its lease is still expired by
-- Redis's clock, so a holder that was pushed back, settled or renewed meanwhile is left
-- alone. Returns 1 if released.
-- #include gate
local P, q, k, jid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local expiry = redis.call('ZSCORE', gate_leases(P, q), k)
if not expiry then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if tonumber(expiry) + tonumber(ARGV[5]) > now then return 0 end
return gate_release(P, q, k, jid)
