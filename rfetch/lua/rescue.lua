-- rescue.lua: release a stuck ordering key: its holder's lease expired and the caller found
-- the holder in no private list. Called by rfetch.store.commands.Commands.rescue only.
--
-- KEYS[1..7]: the seven gate keys of <q> (lib/gate.lua's G).
-- KEYS[8]: the key's waiting list "rfetch:key:<q>:<k>".
-- ARGV[1]: the queue name <q>.
-- ARGV[2]: the ordering key <k>.
-- ARGV[3]: the jid of the lease ("<jid>:<key>").
-- ARGV[4]: grace in seconds: the lease must have expired at least this long ago.
-- Derived keys: a tenant's list "<ring key>|<tenant>" for the key's next job (lib/gate.lua).
--
-- A lease whose jid no longer holds the key is stale (its job finished, or was pushed back
-- or settled, after its heartbeat wrote it): it is removed and nothing else changes.
-- Otherwise the key is released only if its lease is still expired by Redis's clock, so a
-- holder renewed meanwhile is left alone. Every key the release may write is checked first
-- (lib/guard.lua): one of another type changes nothing and is an error reply.
-- Returns 1 if released, 0 if not.
-- #include guard
-- #include gate
local G = gate_keys(1, ARGV[1])
local k, jid = ARGV[2], ARGV[3]
local member = gate_lease_member(k, jid)
local expiry = redis.call('ZSCORE', G.leases, member)
if not expiry then return 0 end
if redis.call('HGET', G.holders, k) ~= jid then
  redis.call('ZREM', G.leases, member)
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if tonumber(expiry) + tonumber(ARGV[4]) > now then return 0 end
local w = wants_new()
gate_release_wants(w, G, KEYS[8])
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
return gate_release(G, k, KEYS[8], jid)
