-- fetch.lua: acknowledge finished jobs and fetch new ones, in one round trip
-- (Sidekiq Pro super_fetch, batched).
--
-- KEYS: pairs, one per queue of the process: KEYS[2i-1] = public queue "queue:<q>",
--       KEYS[2i] = this process's private list "queue:sq|<identity>|<q>".
-- ARGV[1]: the most jobs to move in this call (0 = acknowledge only).
-- ARGV[2]: how many of the pairs, from the first, to fetch from (the others are paused or
--          only named for acknowledgements).
-- ARGV[3..]: acknowledgements, as pairs: pair index (1-based), exact payload to LREM from
--          that pair's private list.
--
-- Acknowledgements first (LREM count 1 of the exact bytes). Then jobs are moved one by one
-- from the right end (oldest) of each public queue to the left end of its private list
-- (LMOVE RIGHT LEFT, as super_fetch), taking queues in the order given until ARGV[1] jobs
-- are moved. Atomic: a job is always in exactly one of the two lists.
-- A public queue key that holds another type than a list is skipped (an error would abort
-- the whole script and starve every other queue) and reported as -pair_index followed by
-- its type.
-- Returns a flat array {pairs_looked_at, pair_index, payload, pair_index, payload, ...}.
for i = 3, #ARGV, 2 do
  redis.call('LREM', KEYS[2 * tonumber(ARGV[i])], 1, ARGV[i + 1])
end
local limit = tonumber(ARGV[1])
local pairs_to_fetch = tonumber(ARGV[2])
local out = {0}
local moved = 0
for p = 1, pairs_to_fetch do
  if moved >= limit then break end
  out[1] = p
  while moved < limit do
    local job = redis.pcall('LMOVE', KEYS[2 * p - 1], KEYS[2 * p], 'RIGHT', 'LEFT')
    if type(job) == 'table' and job['err'] then
      out[#out + 1] = -p
      out[#out + 1] = redis.call('TYPE', KEYS[2 * p - 1])['ok']
      break
    end
    if not job then break end
    moved = moved + 1
    out[#out + 1] = p
    out[#out + 1] = job
  end
end
return out
