-- mark_fetched.lua: the start mark of the job an idle thread's blocking fetch just moved
-- (poison-pill counting, rfetch.worker.started), written by Redis itself. Called by
-- rfetch.worker.fetch.ReliableFetch only, pipelined right behind that thread's BLMOVE on the
-- same connection: Redis runs a client's commands in order, so this runs as soon as the
-- BLMOVE ends, before the thread has its reply, and the mark is in place before the job's
-- perform with no write of the thread's own on its way to perform.
--
-- KEYS[1]: the private list "queue:sq|<identity>|<q>" the BLMOVE moves into (LEFT end).
-- KEYS[2]: the process's start marks "<identity>:started".
-- ARGV[1]: the thread's slot ("t<thread id in hex>").
--
-- Marks the payload at the left end of KEYS[1] under ARGV[1] and returns it (nil when the
-- list is empty). After a BLMOVE that moved a job, that is the job: the caller compares the
-- returned bytes with the BLMOVE's reply and otherwise marks the job itself. After a BLMOVE
-- that timed out, it is a job the process already holds (no job waits for a thread while
-- one blocks), so the slot then names a job that is running, or has run: a recovery counts
-- only jobs it finds in the private list, and the slot's next job overwrites it.
local job = redis.call('LINDEX', KEYS[1], 0)
if job then
  redis.call('HSET', KEYS[2], ARGV[1], job)
end
return job
