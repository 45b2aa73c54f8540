-- settle.lua: take a failed job out of the private list and into the retry, dead or
-- schedule set, and end it as its outcome says (lib/outcome.lua). Called by
-- rfetch.store.commands.Commands.settle only.
--
-- KEYS[1]: private list "queue:sq|<identity>|<q>" holding the fetched payload.
-- KEYS[2]: the sorted set to write: "retry", "dead" or "schedule" (over a limit).
-- KEYS[3]: the namespace prefix P ("" or "<ns>:"), from which the record's keys are derived
--          (lib/keys.lua).
-- ARGV[1]: the raw payload as fetched (what LREM must match).
-- ARGV[2]: score: next retry time, or time of death (float epoch seconds).
-- ARGV[3]: the payload to store (with retry_count, error_message, ...).
-- ARGV[4]: for the dead set, trim entries scored below this (now - 180 days); "" for none.
-- ARGV[5]: for the dead set, the most entries to keep (10,000); "" for no cap.
-- ARGV[6]: the job's record (lib/record.lua); "" for a plain or unparseable job.
-- ARGV[7]: the outcome: "failed" (retry set: an ordering key stays held, strict order
--          survives retries), "skipped" (retry set, the key released: the class's skip
--          policy), "died" or "poison" (dead set), "rescheduled" (schedule set: over a
--          limiter's limit, not counted in a batch).
-- ARGV[8]: the failure's JSON {"error_class", "error_message"} for a batch ("" none).
-- Derived keys: the record's (lib/record.lua), the batch's other keys and its parents'.
--
-- The write and the acknowledgement are one atomic step, and happen only if the job is still
-- in the private list: a job that was pushed back by shutdown or recovery meanwhile is not
-- also put in the retry set (Sidekiq #4112). Every key written and the score are checked
-- first (lib/guard.lua): a sorted set of another type, or a score that is not a number,
-- changes nothing and is an error reply, so the job stays in the private list.
-- The batch's counters change in this same call, only when the job was removed (a job
-- settled twice, after a recovery, counts once).
-- Returns 1 if written, 0 if the job was no longer ours.
-- #include outcome
local outcome = ARGV[7]
local _, unknown = outcome_effects(outcome)
if unknown then return redis.error_reply(unknown) end
local rec = record_of(KEYS[3], ARGV[6])
local w = wants_new()
want(w, KEYS[1], 'list')
want(w, KEYS[2], 'zset')
if ARGV[6] ~= '' then job_end_wants(w, rec, outcome) end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
if not finite(ARGV[2]) or (ARGV[4] ~= '' and not finite(ARGV[4]))
    or (ARGV[5] ~= '' and not finite(ARGV[5])) then
  return redis.error_reply('ERR settle: score ' .. ARGV[2] .. ', trim ' .. ARGV[4] .. ' or cap ' ..
    ARGV[5] .. ' is not a number: nothing was changed')
end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[5]) + 1))
end
if ARGV[6] ~= '' then job_end(rec, outcome, ARGV[1], {failure = ARGV[8]}) end
return 1
