-- push_once.lua: the outbox relay's push, idempotent by jid: push.lua's jobs, each with a
-- marker that says it was pushed, written by the same atomic call. A relay that dies after
-- this call and before its database delete commits leaves the rows to another relay; that
-- relay's call finds the markers and writes nothing for those jobs (rfetch.outbox.relay).
-- Called by rfetch.store.outbox_commands.OutboxCommands.push_once only.
--
-- KEYS[1 .. M]: the markers "rfetch:outbox:pushed:<jid>" of the M jobs, in push order.
-- KEYS[M + 1 ..]: push.lua's KEYS (the scheduled set, the namespace prefix, the gate keys
--          of each queue).
-- ARGV[1]: M, the number of jobs (and markers).
-- ARGV[2]: the markers' time to live in milliseconds (a whole number >= 1).
-- ARGV[3 ..]: push.lua's ARGV.
--
-- All or none: when any marker exists, nothing is written and the reply is
-- {"seen", positions...}: the 1-based positions of the jobs already pushed (the caller
-- pushes the others again without them). Otherwise the jobs are pushed as push.lua does
-- (its errors are error replies, nothing written, no marker set) and every job's marker is
-- set (also for a unique job whose lock was held: it was dealt with); the reply is
-- {"pushed", positions...}: push.lua's reply, the positions not written for a held lock.
-- #include push
local m, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
if not (m and m >= 0 and ttl and ttl >= 1 and math.floor(ttl) == ttl) then
  return redis.error_reply('ERR push_once: bad marker count or TTL: nothing was written')
end
local seen = {'seen'}
for i = 1, m do
  if redis.call('EXISTS', KEYS[i]) == 1 then seen[#seen + 1] = i end
end
if #seen > 1 then return seen end
local refused = push_jobs(m, 2, nil)
if refused.err then return refused end
for i = 1, m do redis.call('SET', KEYS[i], '1', 'PX', ttl) end
local reply = {'pushed'}
for _, position in ipairs(refused) do reply[#reply + 1] = position end
return reply
