-- finish.lua: take one job out of a list - acknowledge it, discard it, or delete it from a
-- public queue - and end it as its outcome says (lib/outcome.lua): its ordering key and
-- unique lock released, its fetch cap's slot given back, its batch counted. Plain
-- acknowledgements keep riding on fetch.lua. Called by
-- rfetch.store.commands.Commands.finish only.
--
-- KEYS[1]: the list holding the job: a private list "queue:sq|<identity>|<q>" (ack), or the
--          public queue "queue:<q>" (admin delete); with ARGV[5] "zset", the queue's
--          priority set "rfetch:prio:<q>" (admin delete of a job of it: ZREM).
-- KEYS[2]: the namespace prefix P ("" or "<ns>:"), from which the record's keys are derived
--          (lib/keys.lua).
-- ARGV[1]: the raw payload (exact bytes, what LREM matches).
-- ARGV[2]: the job's record (lib/record.lua: q, jid, key, unique, ck, bid, ...).
-- ARGV[3]: the outcome (lib/outcome.lua): "succeeded", a death that is not kept
--          ("discarded", "expired", "cancelled"), or "deleted" (an admin delete: nothing
--          counted in a batch).
-- ARGV[4]: the failure's JSON {"error_class", "error_message"} for a batch death ("" none).
-- ARGV[5]: "zset" when KEYS[1] is a priority set (lib/priority.lua); absent for a list.
-- Derived keys: the record's (lib/record.lua), a tenant's list, a concurrency key's waiting
--          list, the batch's other keys, its parents' and a callback's queue.
--
-- Only if this call removed the job (it was not pushed back meanwhile, which keeps it the
-- holder) does the job end. Every key the end may write is checked first (lib/guard.lua):
-- one of another type changes nothing and is an error reply, so the job stays in its list
-- and the key's next job in the key's list.
-- Returns 1 if removed, 0 if the job was no longer in the list.
-- #include outcome
local rec = record_of(KEYS[2], ARGV[2])
local _, unknown = outcome_effects(ARGV[3])
if unknown then return redis.error_reply(unknown) end
local in_set = ARGV[5] == 'zset'
local w = wants_new()
want(w, KEYS[1], in_set and 'zset' or 'list')
job_end_wants(w, rec, ARGV[3])
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
if in_set then
  if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
elseif redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 0
end
job_end(rec, ARGV[3], ARGV[1], {failure = ARGV[4]})
return 1
