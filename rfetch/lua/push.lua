-- push.lua: push one job that has an ordering key or a unique lock (issue #5); plain jobs
-- keep the client's MULTI/LPUSH path.
--
-- KEYS: none (computed from ARGV[1], see lib/gate.lua).
-- ARGV[1]: namespace prefix P ("" or "<ns>:").
-- ARGV[2]: the queue name <q>.
-- ARGV[3]: the payload (JSON text).
-- ARGV[4]: run time for a scheduled job (float epoch s, the "schedule" score), "" for now.
-- ARGV[5]: the ordering key, "" for none.
-- ARGV[6]: the jid.
-- ARGV[7]: unique lock digest, "" for none.
-- ARGV[8]: unique window in milliseconds.
-- ARGV[9]: the tenant, "" for none: the job then goes to its tenant's list (fair queue).
--
-- A unique job whose lock is taken writes nothing and returns 0 (Sidekiq Enterprise's
-- unique jobs). A scheduled job goes to "schedule" and meets the gate when it is due
-- (enqueue_due.lua). A keyed job goes through the gate. Returns 1 when written.
-- #include gate
local P, q, payload = ARGV[1], ARGV[2], ARGV[3]
if ARGV[7] ~= '' then
  local lock = P .. 'rfetch:unique:' .. ARGV[7]
  if not redis.call('SET', lock, ARGV[6], 'NX', 'PX', tonumber(ARGV[8])) then
    return 0
  end
end
if ARGV[4] ~= '' then
  redis.call('ZADD', P .. 'schedule', ARGV[4], payload)
  return 1
end
local t = ARGV[9]
if t == '' then t = nil end
if ARGV[5] ~= '' then
  gate_dispatch(P, q, ARGV[5], ARGV[6], payload, t)
else
  gate_out(P, q, payload, t)
end
return 1
