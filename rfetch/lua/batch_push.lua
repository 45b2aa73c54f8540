-- batch_push.lua: push the jobs of a batch's jobs() block and register them in the batch, in
-- one atomic call: a new batch (with its callbacks and parent), or jobs added to an open one
-- (Sidekiq Pro's batch.jobs and reopening). Called by
-- rfetch.store.batch_commands.BatchCommands.push only.
--
-- KEYS[1]: the batch hash "b-<bid>".
-- KEYS[2]: the batch index "batches" (zset: bid -> created_at, epoch s).
-- KEYS[3]: the namespace prefix P ("" or "<ns>:"), from which the batch's other keys and its
--          parent's are derived (lib/batch.lua).
-- KEYS[4..]: push.lua's KEYS (the scheduled set, the namespace prefix, the gate keys of
--          each queue).
-- ARGV[1]: bid (24 hex).
-- ARGV[2]: "new" (create the batch; its bid must not exist) or "add" (it must exist, be
--          rfetch's (its "engine" field; Sidekiq Pro's batches share the key names) and not
--          have succeeded).
-- ARGV[3]: the batch's TTL in seconds until it succeeds (Sidekiq Pro: 30 days), renewed by
--          each call.
-- ARGV[4]: parent bid ("" for none; "new" only): the parent must exist and not have
--          succeeded; its success then waits for this batch's.
-- ARGV[5]: F; ARGV[6 .. 5 + 2F]: F field/value pairs of the new batch's hash (description,
--          success_ttl, cb_<event>, cbargs_<event>); ignored by "add".
-- ARGV[6 + 2F]: J, then J jids: the jobs' jids in push order (push.lua's positions).
-- ARGV[7 + 2F + J ..]: push.lua's ARGV.
-- Derived keys: "b-<bid>-jids", "-done", "-failinfo", "-died", "-kids", "-waiting-success",
--          "-waiting-complete", the parent's "b-<parent>" and "b-<parent>-kids", the counter
--          "rfetch:batches-created", and what push.lua derives (a tenant's list).
--
-- All or none: the batch's keys, every job's keys and numbers are checked before the first
-- write (lib/guard.lua); a refusal (the batch exists, has succeeded, or a key of another
-- type) writes nothing and is an error reply. The jobs whose unique lock is held are not
-- written and do not join the batch. A new batch none of whose jobs was written succeeds at
-- once (its callbacks fire).
-- Returns push.lua's reply: the positions of the jobs not written (unique lock held).
-- #include guard
-- #include gate
-- #include cap
-- #include push
-- #include batch
local hash, index, P, bid, mode = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]
local ttl = tonumber(ARGV[3])
if not ttl or ttl < 1 then
  return redis.error_reply('ERR batch: TTL ' .. ARGV[3] .. ' is not a number of seconds')
end
local exists = redis.call('EXISTS', hash) == 1
if mode == 'new' and exists then
  return redis.error_reply('ERR batch: batch ' .. bid .. ' exists: nothing was written')
end
if mode == 'add' then
  if exists and redis.call('HGET', hash, 'engine') ~= 'rfetch' then
    return redis.error_reply('ERR batch: batch ' .. bid ..
      ' is not an rfetch batch (a Sidekiq Pro one?): nothing was written')
  end
  if not exists then
    return redis.error_reply('ERR batch: batch ' .. bid ..
      ' does not exist (it expired, or was never created): nothing was written')
  end
  if redis.call('HEXISTS', hash, 'success_at') == 1 then
    return redis.error_reply('ERR batch: batch ' .. bid ..
      ' has succeeded, no job can join it: nothing was written')
  end
end
local parent = mode == 'new' and opt(ARGV[4]) or nil
local phash = parent and batch_hash(P, parent)
if phash then
  if redis.call('HGET', phash, 'engine') ~= 'rfetch' then
    return redis.error_reply('ERR batch: parent batch ' .. parent ..
      ' does not exist (or is not an rfetch batch): nothing was written')
  end
  if redis.call('HEXISTS', phash, 'success_at') == 1 then
    return redis.error_reply('ERR batch: parent batch ' .. parent ..
      ' has succeeded: nothing was written')
  end
end
local w = wants_new()
want(w, hash, 'hash')
want(w, index, 'zset')
for _, part in ipairs({'-jids', '-done', '-died', '-kids'}) do want(w, hash .. part, 'set') end
want(w, hash .. '-failinfo', 'hash')
if phash then
  want(w, phash, 'hash')
  want(w, phash .. '-kids', 'set')
end
local nf = tonumber(ARGV[5])
local fields = {}
for i = 1, 2 * nf do fields[i] = ARGV[5 + i] end
local at = 6 + 2 * nf
local nj = tonumber(ARGV[at])

local refused = push_jobs(3, at + nj, w)
if refused['err'] then return refused end

local skip = {}
for _, position in ipairs(refused) do skip[position] = true end
local written = {}
for i = 1, nj do
  if not skip[i] then written[#written + 1] = ARGV[at + i] end
end
local n = #written
local now = batch_time()
if mode == 'new' then
  redis.call('HSET', hash, 'engine', 'rfetch', 'bid', bid, 'created_at', now, 'total', n,
    'pending', n, 'failures', 0, 'ttl', ttl, unpack(fields))
  redis.call('SADD', hash .. '-done', '')
  redis.call('SADD', hash .. '-died', '')
  redis.call('HSET', hash .. '-failinfo', '', '')
  redis.call('ZADD', index, now, bid)
  redis.call('INCR', key_of(P, 'batch_counter', 'created'))
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. (now - ttl))
  if phash then
    redis.call('HSET', hash, 'parent', parent)
    redis.call('HINCRBY', phash, 'kids', 1)
    redis.call('HINCRBY', phash, 'kids_pending', 1)
    redis.call('HINCRBY', phash, 'kids_incomplete', 1)
    redis.call('SADD', phash .. '-kids', bid)
    local pttl = redis.call('TTL', phash)
    if pttl > 0 then redis.call('EXPIRE', phash .. '-kids', pttl) end
  end
else
  redis.call('HINCRBY', hash, 'total', n)
  redis.call('HINCRBY', hash, 'pending', n)
end
for from = 1, n, 1000 do
  redis.call('SADD', hash .. '-jids', unpack(written, from, math.min(from + 999, n)))
end
batch_expire(hash, ttl)
if mode == 'new' and n == 0 then batch_settle(P, hash, nil) end
return refused
