-- #include keys
-- lib/cap.lua: fetch caps (concurrency keys): at most N jobs of one key of a queue are
-- fetched and not yet finished, across every process; the others wait in Redis and are not
-- fetched (no busy rescheduling). The ordering gate (lib/gate.lua) is the N = 1, in-order
-- case; a job has one or the other. Included with a "-- #include cap" line, after
-- "-- #include guard" (rfetch.store.scripts).
--
-- A script works on the caps of one queue <q> through C, a table of its keys, passed in KEYS
-- by the caller (rfetch.store.caps builds them from rfetch/store/keys.py), or derived from
-- the namespace prefix by cap_keys_of (lib/keys.lua) for a queue named in a payload or a
-- job's record (lib/record.lua, the ending scripts):
--   C.ring    "rfetch:cap:<q>"         list: the READY ring: keys with waiting jobs and a
--                                     free slot, each once (head = right end)
--   C.held    "rfetch:cap-held:<q>"    hash: key -> jobs of the key holding a slot (fetched
--                                     into a private list and not yet out of it)
--   C.slots   "rfetch:cap-slots:<q>"   hash: payload -> 1, for each job holding a slot (the
--                                     exact bytes fetched: no decode on the hot path)
--   C.limits  "rfetch:cap-limits:<q>"  hash: key -> its limit N (the latest pushed)
--   C.wake    "rfetch:fair-wake:<q>"   list: one wake token for idle workers (shared with
--                                     fair tenants)
--   C.capq    "rfetch:cap-queues"      set: queues that have had capped jobs
-- Derived keys: a key's waiting list is the ring key, "|" and the key (C.ring .. '|' .. k),
-- because fetch reads the key from the ring; cap_keys_of builds C from the namespace prefix
-- for enqueue_due.lua and the ending scripts. With a "{tag}" namespace every derived key
-- stays in its slot.
--
-- Invariant kept by every script: a key is in the ring iff its waiting list is non-empty and
-- held < limit. So a fetch step is O(1): the head key gives its oldest job (no scan, no
-- rescheduling), and a finished job puts its key back on the ring in the same call that
-- acknowledges it. A slot is taken by the fetch (cap_step) and given back by every way out
-- of a private list (ack, settle, push-back, orphan recovery) through cap_release, only for
-- a payload that holds one (C.slots), so a capped payload that reached the public queue
-- some other way never gives back a slot it did not take.

local function cap_keys(i, q)
  return {ring = KEYS[i], held = KEYS[i + 1], slots = KEYS[i + 2], limits = KEYS[i + 3],
    wake = KEYS[i + 4], capq = KEYS[i + 5], q = q}
end

-- C derived from the namespace prefix P ("" or "<ns>:") for queue q (lib/keys.lua): for a
-- queue named in a payload (enqueue_due.lua) or in a job's record (lib/record.lua).
local function cap_keys_of(P, q)
  return {ring = key_of(P, 'cap_ring', q), held = key_of(P, 'cap_held', q),
    slots = key_of(P, 'cap_slots', q), limits = key_of(P, 'cap_limits', q),
    wake = key_of(P, 'fair_wake', q), capq = key_of(P, 'cap_queues'), q = q}
end

local function cap_list(C, k) return C.ring .. '|' .. k end

local function cap_wake(C)
  redis.call('LPUSH', C.wake, '1')
  redis.call('LTRIM', C.wake, 0, 0)
end

local function cap_count(C, k) return tonumber(redis.call('HGET', C.held, k) or '0') or 0 end

local function cap_limit_of(C, k) return tonumber(redis.call('HGET', C.limits, k) or '1') or 1 end

-- A capped job of key k enters its key's waiting list: a new one at the tail (LPUSH), a
-- pushed-back one at the head (RPUSH, runs first of the key). limit: the job's limit (nil:
-- keep the stored one). The key joins the ring (at the same end) if it became ready, or
-- leaves it if a lower limit left it no free slot. Keeps the invariant.
local function cap_enter(C, k, limit, payload, at_head)
  local push = at_head and 'RPUSH' or 'LPUSH'
  local list = cap_list(C, k)
  local old = tonumber(redis.call('HGET', C.limits, k) or '')
  local new = limit or old or 1
  if new ~= old then redis.call('HSET', C.limits, k, new) end
  local held = cap_count(C, k)
  local before = redis.call(push, list, payload) - 1
  local was_in = before > 0 and old ~= nil and held < old
  local now_in = held < new
  if now_in and not was_in then
    redis.call(push, C.ring, k)
    cap_wake(C)
  elseif was_in and not now_in then
    redis.call('LREM', C.ring, 1, k)
  end
  redis.call('SADD', C.capq, C.q)
end

-- Up to want (>= 1) jobs of the key at the head of C's ready ring into private list dst,
-- as many as the key has free slots, oldest first, each taking a slot; the key then
-- goes to the ring's tail (round robin across keys, a turn being the key's free slots), or
-- leaves the ring when full or empty. An empty table when the ring is empty. O(1) per job.
local function cap_step(C, dst, want)
  while true do
    local k = redis.call('LINDEX', C.ring, -1)
    if not k then return {} end
    local list = cap_list(C, k)
    local limit = cap_limit_of(C, k)
    local held = cap_count(C, k)
    local jobs = {}
    for _ = 1, math.min(want, limit - held) do  -- none when full: then it leaves the ring
      local job = redis.call('LMOVE', list, dst, 'RIGHT', 'LEFT')
      if not job then break end
      jobs[#jobs + 1] = job
    end
    if #jobs > 0 then
      held = redis.call('HINCRBY', C.held, k, #jobs)
      local fields = {}
      for i, job in ipairs(jobs) do
        fields[2 * i - 1] = job
        fields[2 * i] = '1'
      end
      redis.call('HSET', C.slots, unpack(fields))
      if held >= limit or redis.call('LLEN', list) == 0 then
        redis.call('RPOP', C.ring)
      else
        redis.call('RPOPLPUSH', C.ring, C.ring)
      end
      return jobs
    end
    redis.call('RPOP', C.ring)  -- a full key, or one whose list was deleted: look again
  end
end

-- Give back the slot the fetched payload raw (of key k) holds, if it holds one: the key's
-- count drops, and a key that was full and has waiting jobs joins the ring's tail. The
-- key's list is only read, with pcall: a list key of another type counts as empty (its
-- jobs cannot be fetched until it is fixed) instead of failing after the acknowledgement.
-- Returns 1 if a slot was given back.
local function cap_release(C, k, raw)
  if redis.call('HDEL', C.slots, raw) == 0 then return 0 end
  local held = redis.call('HINCRBY', C.held, k, -1)
  if held <= 0 then
    redis.call('HDEL', C.held, k)
    held = 0
  end
  local limit = cap_limit_of(C, k)
  local waiting = redis.pcall('LLEN', cap_list(C, k))
  if type(waiting) ~= 'number' then waiting = 0 end
  if held == limit - 1 and waiting > 0 then
    redis.call('LPUSH', C.ring, k)
    cap_wake(C)
  elseif held == 0 and waiting == 0 then
    redis.call('HDEL', C.limits, k)  -- an idle key leaves no trace
  end
  return 1
end

-- Put a fetched capped job back (push-back at TERM/quiet/paused queue, orphan recovery):
-- its slot is given back and it goes to the head of its key's list, so it is the key's next
-- job to be fetched; the key keeps its limit.
local function cap_push_back(C, k, payload)
  local limit = cap_limit_of(C, k)  -- read first: the release of a key's last job drops it
  cap_release(C, k, payload)
  cap_enter(C, k, limit, payload, true)
end

-- What each step may write, for lib/guard.lua's check before a script's first write.
-- The queue-wide keys of C are checked once per script run (cap_typed): a script writes
-- them only with their own type, so a key found right stays right; one found wrong is
-- left to misfit, which reports it. A run is known by its KEYS table (a new one per call):
-- a Functions library keeps its locals from call to call (rfetch.store.functions).
local cap_typed, cap_typed_run = {}, nil
local function cap_want(w, key, kind)
  if cap_typed_run ~= KEYS then cap_typed, cap_typed_run = {}, KEYS end
  if cap_typed[key] then return end
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' or t == kind then
    cap_typed[key] = true
  else
    want(w, key, kind)
  end
end

local function cap_enter_wants(w, C, k)
  cap_want(w, C.limits, 'hash')
  cap_want(w, C.held, 'hash')
  want(w, cap_list(C, k), 'list')
  cap_want(w, C.ring, 'list')
  cap_want(w, C.wake, 'list')
  cap_want(w, C.capq, 'set')
end

-- cap_release: it writes only queue-wide keys (its key's list is only read).
local function cap_release_wants(w, C)
  cap_want(w, C.slots, 'hash')
  cap_want(w, C.held, 'hash')
  cap_want(w, C.limits, 'hash')
  cap_want(w, C.ring, 'list')
  cap_want(w, C.wake, 'list')
end

local function cap_push_back_wants(w, C, k)
  cap_release_wants(w, C)
  cap_enter_wants(w, C, k)
end
