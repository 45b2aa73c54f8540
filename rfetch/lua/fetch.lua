-- fetch.lua: acknowledge finished jobs and fetch new ones, in one round trip
-- (Sidekiq Pro super_fetch, batched), with deficit round robin across tenants (issue #5).
--
-- KEYS: pairs, one per queue of the process: KEYS[2i-1] = public queue "queue:<q>",
--       KEYS[2i] = this process's private list "queue:sq|<identity>|<q>"; then, for each
--       fair pair named in ARGV (in that order), three keys: the tenant ring
--       "rfetch:fair:<q>", the credits hash "rfetch:fair-credits:<q>" and the weights hash
--       "rfetch:fair-weights:<q>". A tenant's list is "<ring key>|<tenant>" (computed here,
--       not Redis Cluster safe).
-- ARGV[1]: the most jobs to move in this call (0 = acknowledge only).
-- ARGV[2]: how many of the pairs, from the first, to fetch from (the others are paused or
--          only named for acknowledgements).
-- ARGV[3]: F, the number of fair pairs (queues that have had tenant jobs); 0 for none.
-- ARGV[4..3+F]: the pair index of each fair pair.
-- ARGV[4+F..]: acknowledgements, as pairs: pair index (1-based), exact payload to LREM from
--          that pair's private list; or, for a job with an ordering key or a unique lock
--          (issue #5), seven values: -pair index, payload, namespace prefix P, queue <q>,
--          ordering key ("" for none), jid, unique digest ("" for none).
--
-- Acknowledgements first (LREM count 1 of the exact bytes); a keyed or unique job that
-- this LREM removed also releases its key (its next job goes out, and may be fetched by
-- this very call) and its unique lock, as finish.lua does. Then jobs are moved one by one
-- from the right end (oldest) of each public queue to the left end of its private list
-- (LMOVE RIGHT LEFT, as super_fetch), taking queues in the order given until ARGV[1] jobs
-- are moved. Atomic: a job is always in exactly one list.
-- A fair queue alternates one job from its tenant ring and one from its public queue while
-- both have work. Ring step (O(1)): the tenant at the ring's head (right end) gives its
-- oldest job; its credits for this turn start at its weight (default 1) and drop by one; a
-- tenant whose list is empty leaves the ring, one out of credits goes to the tail. Invariant
-- kept by every script: a tenant is in the ring iff its list is non-empty.
-- A public queue key that holds another type than a list is skipped (an error would abort
-- the whole script and starve every other queue) and reported as -pair_index followed by
-- its type.
-- Returns a flat array {pairs_looked_at, pair_index, payload, pair_index, payload, ...}.
local fair_count = tonumber(ARGV[3])
local n_pairs_keys = #KEYS - 3 * fair_count
local fair = {}
for f = 1, fair_count do
  fair[tonumber(ARGV[3 + f])] = n_pairs_keys + 3 * (f - 1)
end
-- #include gate
local i = 4 + fair_count
while i <= #ARGV do
  local pair = tonumber(ARGV[i])
  if pair > 0 then
    redis.call('LREM', KEYS[2 * pair], 1, ARGV[i + 1])
    i = i + 2
  else
    if redis.call('LREM', KEYS[-2 * pair], 1, ARGV[i + 1]) == 1 then
      local P, q, k, jid, unique = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
      if k ~= '' then gate_release(P, q, k, jid) end
      if unique ~= '' then unique_release(P, unique, jid) end
    end
    i = i + 7
  end
end
local limit = tonumber(ARGV[1])
local pairs_to_fetch = tonumber(ARGV[2])
local out = {0}
local moved = 0

-- One job from the tenant ring whose keys start at KEYS[base + 1], into private list dst.
local function ring_step(base, dst)
  local ring, credits, weights = KEYS[base + 1], KEYS[base + 2], KEYS[base + 3]
  while true do
    local t = redis.call('LINDEX', ring, -1)
    if not t then return nil end
    local list = ring .. '|' .. t
    local job = redis.call('LMOVE', list, dst, 'RIGHT', 'LEFT')
    if job then
      local c = tonumber(redis.call('HGET', credits, t) or redis.call('HGET', weights, t) or '1')
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
  if moved >= limit then break end
  out[1] = p
  local base = fair[p]
  local plain_done = false
  while moved < limit do
    local took = false
    if base then
      local job = ring_step(base, KEYS[2 * p])
      if job then
        moved = moved + 1
        out[#out + 1] = p
        out[#out + 1] = job
        took = true
      end
      if moved >= limit then break end
    end
    if not plain_done then
      local job = redis.pcall('LMOVE', KEYS[2 * p - 1], KEYS[2 * p], 'RIGHT', 'LEFT')
      if type(job) == 'table' and job['err'] then
        out[#out + 1] = -p
        out[#out + 1] = redis.call('TYPE', KEYS[2 * p - 1])['ok']
        plain_done = true
      elseif job then
        moved = moved + 1
        out[#out + 1] = p
        out[#out + 1] = job
        took = true
      else
        plain_done = true
      end
    end
    if not took then break end
  end
end
return out
