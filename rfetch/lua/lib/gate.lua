-- #include keys
-- #include priority
-- lib/gate.lua: the ordering-key gate, fair tenants and unique locks, shared by every script
-- that moves a keyed, unique or tenant job. Included with a "-- #include gate" line, after
-- "-- #include guard" (rfetch.store.scripts), so no rule is written twice.
--
-- A script works on the gate of one queue <q> through G, a table of its keys, passed in KEYS
-- by the caller (rfetch.store.commands builds them from rfetch/store/keys.py), or derived
-- from the namespace prefix by gate_keys_of (lib/keys.lua) for a queue named in a payload
-- or a job's record (lib/record.lua, the ending scripts):
--   G.queue        "queue:<q>"                  the public queue
--   G.queues       "queues"                     set of queue names
--   G.holders      "rfetch:key-holders:<q>"     hash: ordering key -> jid of the one job of
--                                               the key that is "out" (queue, private list,
--                                               retry set)
--   G.leases       "rfetch:key-leases:<q>"      zset: "<jid>:<key>" -> lease expiry (Redis
--                                               TIME, epoch s) of a running holder
--   G.ring         "rfetch:fair:<q>"            list: ring of tenants with pending jobs
--                                               (head = right end)
--   G.wake         "rfetch:fair-wake:<q>"       list: one wake token for idle fair workers
--   G.fair_queues  "rfetch:fair-queues"         set: queues that have had tenant jobs
--   G.q            <q> itself (from ARGV)
-- A key's waiting list "rfetch:key:<q>:<k>" and a unique lock "rfetch:unique:<digest>" are
-- passed in KEYS too (push.lua, api_move.lua), or derived from a job's record.
--
-- Derived keys (the only key names computed here): a tenant's list is the ring key, "|" and
-- the tenant (G.ring .. '|' .. t), because the tenant comes from a payload the script reads
-- (the next job of a released key, the head of a ring); gate_keys_of builds G from the
-- namespace prefix for enqueue_due.lua, whose queues come from the jobs it moves, and for
-- a job's record. With a
-- "{tag}" namespace every derived key stays in the namespace's Redis Cluster hash slot.
-- Payloads are only decoded to read fields, never re-encoded (cjson loses integer precision).
-- A job with a priority (p, lib/priority.lua) goes out to the queue's priority set instead of
-- its list; a tenant job to its tenant's list, whatever its priority (a push of both is
-- refused by rfetch.jobs.options.check_priority).

-- G from the seven keys KEYS[i..i+6] (in the order of the table above) and the queue name.
local function gate_keys(i, q)
  return {queue = KEYS[i], queues = KEYS[i + 1], holders = KEYS[i + 2], leases = KEYS[i + 3],
    ring = KEYS[i + 4], wake = KEYS[i + 5], fair_queues = KEYS[i + 6], q = q}
end

-- G derived from the namespace prefix P ("" or "<ns>:") for queue q (lib/keys.lua): for a
-- queue named in a payload (enqueue_due.lua) or in a job's record (lib/record.lua).
local function gate_keys_of(P, q)
  return {queue = key_of(P, 'queue', q), queues = key_of(P, 'queues'),
    holders = key_of(P, 'key_holders', q), leases = key_of(P, 'key_leases', q),
    ring = key_of(P, 'fair_ring', q), wake = key_of(P, 'fair_wake', q),
    fair_queues = key_of(P, 'fair_queues'), q = q}
end

local function gate_lease_member(k, jid) return jid .. ':' .. k end

-- Fields of a payload that may carry gate data: (ordering_key, jid, queue, unique_key,
-- tenant, priority (prio_of_payload)); nil for those absent. A cheap plain find first, so payloads without
-- the fields cost no decode (rfetch.jobs.payload.Routing reads the same fields the same way).
local function gate_fields(payload)
  if not string.find(payload, '"ordering_key"', 1, true)
      and not string.find(payload, '"unique_key"', 1, true)
      and not string.find(payload, '"tenant"', 1, true) then
    return nil, nil, nil, nil, nil, nil
  end
  local ok, job = pcall(cjson.decode, payload)
  if not ok or type(job) ~= 'table' then return nil, nil, nil, nil, nil, nil end
  local function str(v) if type(v) == 'string' and v ~= '' then return v end return nil end
  return str(job['ordering_key']), str(job['jid']), str(job['queue']), str(job['unique_key']),
    str(job['tenant']), prio_of_payload(job['priority'])
end

-- Z (lib/priority.lua) of G's queue, its prefix read from G.queue ("<P>queue:<q>").
local function gate_prio_keys(G)
  local P = string.sub(G.queue, 1, #G.queue - #key_of('', 'queue', G.q))
  return prio_keys_of(P, G.q)
end

-- Jobs in G's queue's priority set (counted with its list by max_queue_size).
local function prio_size(G)
  local n = redis.pcall('ZCARD', gate_prio_keys(G).set)
  return type(n) == 'number' and n or 0
end

-- An argument that stands for "none" when empty.
local function opt(v) if v == nil or v == '' then return nil end return v end

local function fair_wake(G)
  redis.call('LPUSH', G.wake, '1')
  redis.call('LTRIM', G.wake, 0, 0)
  redis.call('PUBLISH', G.queue, '')  -- and idle workers of q that listen on another queue
end

-- A tenant job enters its tenant's list: a new one at the tail (LPUSH, after its other
-- jobs), a fetched one pushed back at the head (RPUSH, runs first of the tenant). A tenant
-- whose list was empty joins the ring at the same end. Keeps: tenant in ring iff its list is
-- non-empty.
local function fair_enter(G, t, payload, at_head)
  local push = at_head and 'RPUSH' or 'LPUSH'
  if redis.call(push, G.ring .. '|' .. t, payload) == 1 then
    redis.call(push, G.ring, t)
    fair_wake(G)
  end
  redis.call('SADD', G.queues, G.q)
  redis.call('SADD', G.fair_queues, G.q)
end

local function fair_send(G, t, payload) fair_enter(G, t, payload, false) end

-- The stage after the gate: tenant t's list if the job has a tenant, else the queue's
-- priority set if it has a priority p, else the public queue; at its tail (LPUSH: runs after
-- what is already there), or with at_head at its head (RPUSH, runs next: push-back,
-- recovery).
local function gate_out(G, payload, t, at_head, p)
  if t then
    fair_enter(G, t, payload, at_head)
    return
  end
  if p then
    prio_enter(gate_prio_keys(G), payload, p, at_head)
    redis.call('SADD', G.queues, G.q)
    redis.call('PUBLISH', G.queue, '')  -- wakes idle workers of q (rfetch.worker.wake)
    return
  end
  redis.call(at_head and 'RPUSH' or 'LPUSH', G.queue, payload)
  redis.call('SADD', G.queues, G.q)
  redis.call('PUBLISH', G.queue, '')  -- wakes idle workers of q (rfetch.worker.wake)
end

-- Send a job of key k (waiting list klist) out if the key is free or the job already holds
-- it, else make it wait in the key's list (in push order, whatever its priority p: the
-- key's order comes first). Returns 1 if sent out, 0 if waiting.
local function gate_dispatch(G, k, klist, jid, payload, t, p)
  local holder = redis.call('HGET', G.holders, k)
  if not holder then
    redis.call('HSET', G.holders, k, jid)
    gate_out(G, payload, t, false, p)
    return 1
  end
  if holder == jid then
    gate_out(G, payload, t, false, p)
    return 1
  end
  redis.call('LPUSH', klist, payload)
  return 0
end

-- Release key k (waiting list klist) if jid holds it: the oldest waiting job becomes the
-- holder and goes out, or the key is freed. Returns 1 if released, 0 if jid was not the
-- holder (nothing changed).
local function gate_release(G, k, klist, jid)
  if redis.call('HGET', G.holders, k) ~= jid then return 0 end
  redis.call('ZREM', G.leases, gate_lease_member(k, jid))
  local nxt = redis.call('RPOP', klist)
  if nxt then
    local _, njid, _, _, nt, np = gate_fields(nxt)
    redis.call('HSET', G.holders, k, njid or '')
    gate_out(G, nxt, nt, false, np)
  else
    redis.call('HDEL', G.holders, k)
  end
  return 1
end

-- Put a fetched job back (push-back at TERM/quiet, orphan recovery) if it has an ordering
-- key (k, with jid, waiting list klist) or a tenant t; returns false for a job with
-- neither (the caller puts it back by its priority p, or RPUSHes it). A key's holder goes to the
-- head of its stage (public queue or tenant list: runs next); a job that does not hold its key goes
-- to the head of the key's list (runs first once the key is free); a job of a key with no holder at
-- all (released meanwhile) is dispatched like a new one.
local function gate_push_back(G, payload, k, klist, jid, t, p)
  if k and jid then
    redis.call('ZREM', G.leases, gate_lease_member(k, jid))
    local holder = redis.call('HGET', G.holders, k)
    if holder == jid then
      gate_out(G, payload, t, true, p)
    elseif holder then
      redis.call('RPUSH', klist, payload)
    else
      gate_dispatch(G, k, klist, jid, payload, t, p)
    end
    return true
  end
  if t then
    fair_enter(G, t, payload, true)
    return true
  end
  return false
end

-- Drop the unique lock (key lock) if jid still holds it.
local function unique_release(lock, jid)
  if redis.call('GET', lock) == jid then redis.call('DEL', lock) end
end

-- What each gate step may write, for lib/guard.lua's check before a script's first write
-- (a script including gate includes guard first). Each adds to w the keys the step may
-- write, with their types: a superset of what it writes, decided without writing.

-- gate_out (and fair_enter) of a job of tenant t and priority p (nil for none).
local function gate_out_wants(w, G, t, p)
  if t then
    want(w, G.ring .. '|' .. t, 'list')
    want(w, G.ring, 'list')
    want(w, G.wake, 'list')
    want(w, G.fair_queues, 'set')
  elseif p then
    prio_enter_wants(w, gate_prio_keys(G))
  else
    want(w, G.queue, 'list')
  end
  want(w, G.queues, 'set')
end

-- gate_dispatch of a job of key k (waiting list klist), tenant t and priority p.
local function gate_dispatch_wants(w, G, klist, t, p)
  want(w, G.holders, 'hash')
  want(w, klist, 'list')
  gate_out_wants(w, G, t, p)
end

-- gate_release of key k (waiting list klist): the key's oldest waiting job is read (not
-- taken) to know where it would go.
local function gate_release_wants(w, G, klist)
  want(w, G.holders, 'hash')
  want(w, G.leases, 'zset')
  want(w, klist, 'list')
  local nt, np = nil, nil
  if redis.call('TYPE', klist)['ok'] == 'list' then
    local nxt = redis.call('LINDEX', klist, -1)
    if nxt then
      local _, _, _, _, t, p = gate_fields(nxt)
      nt, np = t, p
    end
  end
  gate_out_wants(w, G, nt, np)
end

-- gate_push_back of a job (key k with jid and waiting list klist, tenant t, priority p);
-- a job of the priority set or the list when neither.
local function gate_push_back_wants(w, G, k, klist, jid, t, p)
  if k and jid then
    want(w, G.leases, 'zset')
    gate_dispatch_wants(w, G, klist, t, p)
  else
    gate_out_wants(w, G, t, p)
  end
end

-- unique_release of lock.
local function unique_release_wants(w, lock) want(w, lock, 'string') end
