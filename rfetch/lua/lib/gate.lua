-- lib/gate.lua: the ordering-key gate and unique locks (issue #5), shared by every script
-- that moves a keyed or unique job. Included with a "-- #include gate" line (rfetch.scripts),
-- so no rule is written twice.
--
-- Keys are computed from P, the namespace prefix ("" or "<ns>:"), with the formats of
-- rfetch/keys.py (not Redis Cluster safe, as enqueue_due.lua):
--   P.."rfetch:key-holders:"..q        hash: ordering key -> jid of the one job of the key
--                                      that is "out" (queue, private list, retry set)
--   P.."rfetch:key:"..q..":"..k        list: the key's waiting jobs, newest left, oldest right
--   P.."rfetch:key-leases:"..q         zset: "<jid>:<key>" -> lease expiry (Redis TIME, epoch
--                                      s) of a running holder, written by its heartbeat
--   P.."rfetch:unique:"..digest        string: jid holding a unique lock
--   P.."queue:"..q, P.."queues"        the public queue and the queues set
--   P.."rfetch:fair:"..q               list: ring of tenants with pending jobs (head = right)
--   P.."rfetch:fair:"..q.."|"..t       list: tenant t's pending jobs (newest left)
--   P.."rfetch:fair-wake:"..q          list: one wake token for idle fair workers
--   P.."rfetch:fair-queues"            set: queues that have had tenant jobs
-- Payloads are only decoded to read fields, never re-encoded (cjson loses integer precision).

local function gate_holders(P, q) return P .. 'rfetch:key-holders:' .. q end
local function gate_list(P, q, k) return P .. 'rfetch:key:' .. q .. ':' .. k end
local function gate_leases(P, q) return P .. 'rfetch:key-leases:' .. q end
local function gate_lease_member(k, jid) return jid .. ':' .. k end

-- Fields of a payload that may carry gate data: (ordering_key, jid, queue, unique_key,
-- tenant); nil for those absent. A cheap plain find first, so payloads without the fields
-- cost no decode.
local function gate_fields(payload)
  if not string.find(payload, '"ordering_key"', 1, true)
      and not string.find(payload, '"unique_key"', 1, true)
      and not string.find(payload, '"tenant"', 1, true) then
    return nil, nil, nil, nil, nil
  end
  local ok, job = pcall(cjson.decode, payload)
  if not ok or type(job) ~= 'table' then return nil, nil, nil, nil, nil end
  local function str(v) if type(v) == 'string' and v ~= '' then return v end return nil end
  return str(job['ordering_key']), str(job['jid']), str(job['queue']), str(job['unique_key']),
    str(job['tenant'])
end

local function fair_wake(P, q)
  local wake = P .. 'rfetch:fair-wake:' .. q
  redis.call('LPUSH', wake, '1')
  redis.call('LTRIM', wake, 0, 0)
end

-- A tenant job enters its tenant's list: a new one at the tail (LPUSH, after its other
-- jobs), a fetched one pushed back at the head (RPUSH, runs first of the tenant). A tenant
-- whose list was empty joins the ring at the same end. Keeps: tenant in ring iff its list is
-- non-empty.
local function fair_enter(P, q, t, payload, at_head)
  local ring = P .. 'rfetch:fair:' .. q
  local push = at_head and 'RPUSH' or 'LPUSH'
  if redis.call(push, ring .. '|' .. t, payload) == 1 then
    redis.call(push, ring, t)
    fair_wake(P, q)
  end
  redis.call('SADD', P .. 'queues', q)
  redis.call('SADD', P .. 'rfetch:fair-queues', q)
end

local function fair_send(P, q, t, payload) fair_enter(P, q, t, payload, false) end

-- The stage after the gate: tenant t's list if the job has a tenant, else the public
-- queue; at its tail (LPUSH: runs after what is already there), or with at_head at its head
-- (RPUSH, runs next: push-back, recovery).
local function gate_out(P, q, payload, t, at_head)
  if t then
    fair_enter(P, q, t, payload, at_head)
    return
  end
  redis.call(at_head and 'RPUSH' or 'LPUSH', P .. 'queue:' .. q, payload)
  redis.call('SADD', P .. 'queues', q)
end

-- Send a keyed job out if its key is free or it already holds it, else make it wait in the
-- key's list. Returns 1 if sent out, 0 if waiting.
local function gate_dispatch(P, q, k, jid, payload, t)
  local hk = gate_holders(P, q)
  local holder = redis.call('HGET', hk, k)
  if not holder then
    redis.call('HSET', hk, k, jid)
    gate_out(P, q, payload, t)
    return 1
  end
  if holder == jid then
    gate_out(P, q, payload, t)
    return 1
  end
  redis.call('LPUSH', gate_list(P, q, k), payload)
  return 0
end

-- Release key k if jid holds it: the oldest waiting job becomes the holder and goes out, or
-- the key is freed. Returns 1 if released, 0 if jid was not the holder (nothing changed).
local function gate_release(P, q, k, jid)
  local hk = gate_holders(P, q)
  if redis.call('HGET', hk, k) ~= jid then return 0 end
  redis.call('ZREM', gate_leases(P, q), gate_lease_member(k, jid))
  local nxt = redis.call('RPOP', gate_list(P, q, k))
  if nxt then
    local _, njid, _, _, nt = gate_fields(nxt)
    redis.call('HSET', hk, k, njid or '')
    gate_out(P, q, nxt, nt)
  else
    redis.call('HDEL', hk, k)
  end
  return 1
end

-- Put a fetched job back (push-back at TERM/quiet, orphan recovery) if it has an ordering
-- key or a tenant; returns false for a plain job (the caller RPUSHes it). A key's holder
-- goes to the head of its stage (public queue or tenant list: runs next); a job that does
-- not hold its key goes to the head of the key's list (runs first once the key is free); a
-- job of a key with no holder at all (released meanwhile) is dispatched like a new one.
local function gate_push_back(P, q, payload)
  local k, jid, _, _, t = gate_fields(payload)
  if k and jid then
    redis.call('ZREM', gate_leases(P, q), gate_lease_member(k, jid))
    local holder = redis.call('HGET', gate_holders(P, q), k)
    if holder == jid then
      gate_out(P, q, payload, t, true)
    elseif holder then
      redis.call('RPUSH', gate_list(P, q, k), payload)
    else
      gate_dispatch(P, q, k, jid, payload, t)
    end
    return true
  end
  if t then
    fair_enter(P, q, t, payload, true)
    return true
  end
  return false
end

-- Drop a unique lock if jid still holds it.
local function unique_release(P, digest, jid)
  local lock = P .. 'rfetch:unique:' .. digest
  if redis.call('GET', lock) == jid then redis.call('DEL', lock) end
end
