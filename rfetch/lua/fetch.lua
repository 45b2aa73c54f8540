-- fetch.lua: acknowledge finished jobs and fetch new ones, in one round trip
-- (Sidekiq Pro super_fetch, batched), with deficit round robin across tenants (fair
-- tenants). Called by rfetch.store.commands.Commands.fetch only.
--
-- ARGV[1]: the most jobs to move in this call (0 = acknowledge only).
-- ARGV[2]: N, the number of queues named (pairs of keys below).
-- ARGV[3]: how many of the pairs, from the first, to fetch from (the others are paused or
--          only named for acknowledgements).
-- ARGV[4]: F, the number of fair pairs (queues that have had tenant jobs); 0 for none.
-- ARGV[5 .. 4+F]: the pair index (1-based) of each fair pair.
-- Then C, the number of capped pairs fetched from (queues with fetch caps), and their C
--          pair indices: their ready ring of concurrency keys is fetched from too.
-- Then Q, the number of priority pairs fetched from (queues that have had priority jobs),
--          and their Q pair indices: their priority set is fetched from too.
-- Then A, the number of plain acknowledgements, and A records of two values:
--          pair index, exact payload to LREM from that pair's private list.
-- Then R, the number of acknowledgements that end more than a plain job (an ordering key,
--          a unique lock, a fetch cap's slot, a batch, ...), and R records of three values:
--          pair index, exact payload, the job's record (lib/record.lua).
-- KEYS[2i-1], KEYS[2i] (i = 1..N): public queue "queue:<q>" and this process's private
--          list "queue:sq|<identity>|<q>".
-- Then, for each fair pair (in ARGV's order), three keys: the tenant ring "rfetch:fair:<q>",
--          the credits hash "rfetch:fair-credits:<q>", the weights hash
--          "rfetch:fair-weights:<q>".
-- Then, for each capped pair (in ARGV's order), the six cap keys of its queue (lib/cap.lua's
--          C).
-- Then, for each priority pair (in ARGV's order), its priority set "rfetch:prio:<q>".
-- Last, when R > 0: the namespace prefix P, from which the records' keys are derived
--          (lib/keys.lua).
-- Derived keys: a tenant's list "<ring key>|<tenant>", the tenant being read from the ring
--          (lib/gate.lua); a concurrency key's waiting list "<cap ring key>|<key>", the key
--          being read from the cap ring (lib/cap.lua); the records' keys (lib/record.lua), a
--          batch's other keys, its parents' and a callback's queue (lib/batch.lua).
--
-- Acknowledgements first (LREM of the exact bytes, count -1: from the right end, where the
-- oldest jobs are, which mostly end first; from the left end, each acknowledgement scanned
-- nearly the whole private list while hundreds of async jobs were held; identical bytes are
-- one job either way); one with a record that this LREM removed ends as "succeeded"
-- (lib/outcome.lua), in this same call: its key released (its next job goes out, and may
-- be fetched by this very call), its unique lock dropped,
-- its cap slot given back (so the key's next job may be fetched by this very call), its
-- batch counted. A release one of whose keys has another type (lib/guard.lua) is not done:
-- the job is acknowledged and counted, and its key stays held until stuck-key rescue
-- (rescue.lua) finds the keys fixed; the key's next job stays waiting (a batch hash that is
-- missing or of another type: acknowledged, not counted). Then jobs are moved one by one
-- from the right end (oldest) of each public queue to the left end of its private list
-- (LMOVE RIGHT LEFT, as super_fetch), taking queues in the order given until ARGV[1] jobs
-- are moved.
-- Atomic: a job is always in exactly one list.
-- A fair queue alternates one job from its tenant ring and one from its public queue while
-- both have work; a capped queue adds to each turn the jobs of the key at the head of its
-- ready ring of concurrency keys, up to the key's free slots (lib/cap.lua: O(1) per job, a
-- key at its limit is not in the ring, so its waiting jobs are never fetched). An
-- acknowledgement gives its slot back first, so the key's next job may be fetched by this
-- very call. Ring step (O(1)): the tenant at the ring's head (right end) gives its
-- oldest job; its credits for this turn start at its weight (default 1) and drop by one; a
-- tenant whose list is empty leaves the ring, one out of credits goes to the tail. Invariant
-- kept by every script: a tenant is in the ring iff its list is non-empty.
-- A priority queue's plain step takes its highest-priority job (lib/priority.lua's
-- prio_take: lowest score, ZRANGEBYSCORE LIMIT 1, ZREM, LPUSH to the private list) while one
-- of priority > 0 waits, then the list's oldest, then, the list empty, those of priority < 0.
-- A public queue key that holds another type than a list is skipped (an error would abort
-- the whole script and starve every other queue) and reported with its type. Any other
-- error of the move (OOM at maxmemory, READONLY) ends the fetch: an error reply when no
-- job was moved, else the jobs moved so far (acknowledgements done before stay done).
-- Returns {pairs_looked_at, {pair, payload, pair, payload, ...}, {pair, type, ...}}: the
-- jobs moved, oldest first, and the queues skipped for their type.
-- #include outcome
local limit = tonumber(ARGV[1])
local n_pairs = tonumber(ARGV[2])
local pairs_to_fetch = tonumber(ARGV[3])
local fair_count = tonumber(ARGV[4])
local fair = {}
for f = 1, fair_count do
  fair[tonumber(ARGV[4 + f])] = 2 * n_pairs + 3 * (f - 1)
end
local a = 5 + fair_count
local cap_count_n = tonumber(ARGV[a])
local capped = {}
for c = 1, cap_count_n do
  capped[tonumber(ARGV[a + c])] = cap_keys(2 * n_pairs + 3 * fair_count + 6 * (c - 1) + 1, '')
end
a = a + cap_count_n + 1
local prio_count = tonumber(ARGV[a])
local prio = {}
for z = 1, prio_count do
  prio[tonumber(ARGV[a + z])] = KEYS[2 * n_pairs + 3 * fair_count + 6 * cap_count_n + z]
end
a = a + prio_count + 1
for r = 1, tonumber(ARGV[a]) do
  local at = a + 2 * r - 1
  redis.call('LREM', KEYS[2 * tonumber(ARGV[at])], -1, ARGV[at + 1])
end
a = a + 2 * tonumber(ARGV[a]) + 1
local P = KEYS[#KEYS]  -- the prefix, when an acknowledgement has a record
local KEEP_KEYS = {keep_keys = true}
local cap_fit = {}  -- queue -> whether its cap keys have their types (checked once a call)
for r = 1, tonumber(ARGV[a]) do
  local at = a + 3 * r - 2
  local p, raw = tonumber(ARGV[at]), ARGV[at + 1]
  local rec = record_of(P, ARGV[at + 2])
  local releasable = true
  if rec.key or rec.lock or (rec.C and cap_fit[rec.q] == nil) then  -- types checked first
    local w = wants_new()
    job_end_wants(w, rec, 'succeeded')
    releasable = #w.keys == 0 or misfit(w) == nil
    if rec.C and not (rec.key or rec.lock) then cap_fit[rec.q] = releasable end
  elseif rec.C then  -- a capped job's only keys are its queue's: as checked before
    releasable = cap_fit[rec.q]
  end
  if redis.call('LREM', KEYS[2 * p], -1, raw) == 1 then
    job_end(rec, 'succeeded', raw, not releasable and KEEP_KEYS or nil)
  end
end
local jobs, broken = {}, {}
local looked_at = 0
local moved = 0
local refused = false

-- A job moved from the p-th queue: counted, and returned with p.
local function take(p, job)
  moved = moved + 1
  jobs[#jobs + 1] = p
  jobs[#jobs + 1] = job
end

-- One job from the tenant ring whose keys start at KEYS[base + 1], into private list dst.
local function ring_step(base, dst)
  local ring, credits, weights = KEYS[base + 1], KEYS[base + 2], KEYS[base + 3]
  while true do
    local t = redis.call('LINDEX', ring, -1)
    if not t then return nil end
    local list = ring .. '|' .. t
    -- Credits are read before the move: an error after a write would leave the job in
    -- the private list with no one told (Redis does not roll back a script).
    local c = tonumber(redis.call('HGET', credits, t) or redis.call('HGET', weights, t) or '1')
    local job = redis.call('LMOVE', list, dst, 'RIGHT', 'LEFT')
    if job then
      c = c - 1
      if redis.call('LLEN', list) == 0 then
        redis.call('RPOP', ring)
        redis.call('HDEL', credits, t)
      elseif c <= 0 then
        redis.call('RPOPLPUSH', ring, ring)
        redis.call('HDEL', credits, t)
      else
        redis.call('HSET', credits, t, c)
      end
      return job
    end
    -- An empty tenant in the ring (its list was deleted): drop it and look again.
    redis.call('RPOP', ring)
    redis.call('HDEL', credits, t)
  end
end

for p = 1, pairs_to_fetch do
  if moved >= limit or refused then break end
  looked_at = p
  local base = fair[p]
  local C = capped[p]
  local Z = prio[p]
  local plain_done = false
  while moved < limit do
    local took = false
    if C then
      for _, job in ipairs(cap_step(C, KEYS[2 * p], limit - moved)) do
        take(p, job)
        took = true
      end
      if moved >= limit then break end
    end
    if base then
      local job = ring_step(base, KEYS[2 * p])
      if job then
        take(p, job)
        took = true
      end
      if moved >= limit then break end
    end
    if not plain_done then
      local job = Z and prio_take(Z, KEYS[2 * p], true)
      if not job then
        job = redis.pcall('LMOVE', KEYS[2 * p - 1], KEYS[2 * p], 'RIGHT', 'LEFT')
      end
      if not job and Z then job = prio_take(Z, KEYS[2 * p], false) end
      if type(job) == 'table' and job['err'] and not string.find(job['err'], 'WRONGTYPE') then
        -- Another reply error (OOM at maxmemory, READONLY): not this queue's fault. With
        -- nothing moved yet it is the caller's error; else the moved jobs are returned.
        if #jobs == 0 then return redis.error_reply(job['err']) end
        refused = true
        break
      elseif type(job) == 'table' and job['err'] then
        broken[#broken + 1] = p
        broken[#broken + 1] = redis.call('TYPE', KEYS[2 * p - 1])['ok']
        plain_done = true
      elseif job then
        take(p, job)
        took = true
      else
        plain_done = true
      end
    end
    if not took then break end
  end
end
return {looked_at, jobs, broken}
