-- fetch.lua: reliable batch fetch (Sidekiq Pro super_fetch, many jobs per round trip).
--
-- KEYS: pairs in fetch order: KEYS[2i-1] = public queue "queue:<q>",
--       KEYS[2i] = this process's private list "queue:sq|<identity>|<q>".
-- ARGV[1]: the most jobs to move in this call (>= 1).
--
-- Moves jobs one by one from the right end (oldest) of each public queue to the left end of
-- its private list (LMOVE RIGHT LEFT, as super_fetch), taking queues in the order given until
-- ARGV[1] jobs are moved. Atomic: a job is always in exactly one of the two lists.
-- Returns a flat array {pair_index, payload, pair_index, payload, ...} (pair_index 1-based).
local limit = tonumber(ARGV[1])
local out = {}
local moved = 0
for i = 1, #KEYS, 2 do
  while moved < limit do
    local job = redis.call('LMOVE', KEYS[i], KEYS[i + 1], 'RIGHT', 'LEFT')
    if not job then break end
    moved = moved + 1
    out[#out + 1] = (i + 1) / 2
    out[#out + 1] = job
  end
  if moved >= limit then break end
end
return out
