-- #include keys
-- lib/priority.lua: priorities inside one queue <q>. Included with "-- #include priority",
-- after "-- #include guard" (lib/gate.lua includes it, so every script that sends a job
-- out through the gate has it).
--
-- A job whose payload has a "priority" other than 0 (a whole number from -100 to 100;
-- higher runs first) waits in the queue's priority set instead of its list:
--   Z.set     "rfetch:prio:<q>"       sorted set: payload -> score; the lowest score is
--                                     fetched first
--   Z.queues  "rfetch:prio-queues"    hash: <q> -> the push sequence of <q>'s priority
--                                     jobs (HINCRBY); workers look it up (HMGET) to know
--                                     which queues to fetch priority jobs from
--   Z.wake    "rfetch:fair-wake:<q>"  list: one wake token for idle workers (shared with
--                                     fair tenants and fetch caps)
-- A job of priority 0 (or none, or a value that is not such a number: a Ruby client's
-- payload) is a plain job of "queue:<q>", whose cost does not change.
--
-- Score: (100 - priority) * 2^44, plus 2^43 + seq for a new job (seq: the queue's next
-- sequence number, so push order holds within a priority), or plus 2^43 - seq for a job
-- put back (push-back at TERM, orphan recovery: it runs first of its priority, as RPUSH
-- puts a plain job at the head of the list). 201 bands of 2^44 stay below 2^53: every
-- score is exact in a double, and 2^43 pushes fit in a band's half.
-- Against the list (fetch.lua, prio_take): jobs of priority > 0 are fetched before the
-- list's jobs, jobs of priority < 0 only when the list is empty.
-- A payload is a member once: two pushes of the exact same bytes (the same jid) keep one.
-- Derived keys: Z from the namespace prefix (lib/keys.lua).

local PRIO_MAX = 100
local PRIO_BAND = 17592186044416  -- 2^44
local PRIO_HALF = 8796093022208   -- 2^43
-- Scores below this one, 100 * 2^44, are those of jobs of priority > 0 (fetched before
-- the list's); a literal, so a script's prelude computes nothing.
local PRIO_ABOVE_LIST = '(1759218604441600'

-- The priority of a record's "prio" v (text): a whole number from -100 to 100 other than
-- 0, else nil (a plain job of the list).
local function prio_of(v)
  local p = tonumber(v)
  if p and p == math.floor(p) and p >= -PRIO_MAX and p <= PRIO_MAX and p ~= 0 then
    return p
  end
  return nil
end

-- The priority of a payload's "priority" field v: a JSON number only (a string is not a
-- priority, as rfetch.jobs.options.priority_of reads it), else as prio_of.
local function prio_of_payload(v)
  if type(v) ~= 'number' then return nil end
  return prio_of(v)
end

-- Z of queue q under prefix P.
local function prio_keys_of(P, q)
  return {set = key_of(P, 'prio', q), queues = key_of(P, 'prio_queues'),
    wake = key_of(P, 'fair_wake', q), q = q}
end

-- The score of a job of priority p with sequence number seq (see the header).
local function prio_score(p, seq, at_head)
  return (PRIO_MAX - p) * PRIO_BAND + PRIO_HALF + (at_head and -seq or seq)
end

-- A job of priority p (prio_of) enters Z: after the other jobs of its priority, or with
-- at_head before them; one wake token for idle workers.
local function prio_enter(Z, payload, p, at_head)
  local seq = redis.call('HINCRBY', Z.queues, Z.q, 1)
  redis.call('ZADD', Z.set, string.format('%.0f', prio_score(p, seq, at_head)), payload)
  redis.call('LPUSH', Z.wake, '1')
  redis.call('LTRIM', Z.wake, 0, 0)
end

-- What prio_enter may write (lib/guard.lua).
local function prio_enter_wants(w, Z)
  want(w, Z.set, 'zset')
  want(w, Z.queues, 'hash')
  want(w, Z.wake, 'list')
end

-- Move the first job of priority set key z to the left end of private list dst (as LMOVE
-- RIGHT LEFT moves a list's); with above_list only a job of priority > 0. Returns its
-- payload, or nil when there is none (or z holds another type: skipped, so one bad key
-- does not stop the fetch of every queue).
local function prio_take(z, dst, above_list)
  local top = redis.pcall('ZRANGEBYSCORE', z, '-inf', above_list and PRIO_ABOVE_LIST or '+inf',
    'LIMIT', 0, 1)
  if type(top) ~= 'table' or top['err'] or not top[1] then return nil end
  redis.call('ZREM', z, top[1])
  redis.call('LPUSH', dst, top[1])
  return top[1]
end
