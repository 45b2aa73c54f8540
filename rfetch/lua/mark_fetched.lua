-- mark_fetched.lua: the start mark of the job an idle thread's blocking fetch just moved
-- (poison-pill counting, rfetch.worker.started), written by Redis itself. Called by
-- rfetch.worker.fetch.ReliableFetch only, pipelined on the blocking connection right behind
-- that thread's BLMOVE (and, on a worker of several queues, behind the fetch a wake-up
-- appends, rfetch.worker.wake): Redis runs a client's commands in order, so this runs as soon
-- as they end, before the thread has their replies, and the mark is in place before the job's
-- perform with no write of the thread's own on its way there.
--
-- KEYS[1 .. N]: the process's private lists "queue:sq|<identity>|<q>" of the queues the
--          blocking fetch and the fetch behind it take from, in queue order (a job moved
--          goes to the LEFT end of its queue's list).
-- KEYS[N+1]: the process's start marks "<identity>:started".
-- ARGV[1]: the thread's slot ("t<thread id in hex>").
--
-- Marks, under ARGV[1], the job at the left end of the first of KEYS[1 .. N] whose left-end
-- job is not marked yet (under any slot), and returns it; nil when there is none. While a
-- thread blocks no job waits for a thread, so every other job the process holds has started
-- and is marked: the unmarked left end is the job just moved (the BLMOVE's first, else the
-- appended fetch's), the one the thread runs. The caller compares the returned bytes with
-- that job and otherwise marks it itself (which overwrites the slot before perform).
local n = #KEYS - 1
local started = KEYS[n + 1]
local marked = {}
for _, job in ipairs(redis.call('HVALS', started)) do marked[job] = true end
for i = 1, n do
  local job = redis.call('LINDEX', KEYS[i], 0)
  if job and not marked[job] then
    redis.call('HSET', started, ARGV[1], job)
    return job
  end
end
return nil
