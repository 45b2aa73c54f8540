-- push.lua: push one job that has an ordering key, a unique lock or a tenant; plain jobs
-- keep the client's MULTI/LPUSH path. Called by rfetch.store.commands.Commands.push only.
--
-- KEYS[1]: the scheduled set "schedule".
-- KEYS[2..8]: the seven gate keys of <q> (lib/gate.lua's G).
-- KEYS[9..]: the key's waiting list "rfetch:key:<q>:<k>" if ARGV[4] is not empty, then the
--          unique lock "rfetch:unique:<digest>" if ARGV[6] is not empty.
-- ARGV[1]: the queue name <q>.
-- ARGV[2]: the payload (JSON text).
-- ARGV[3]: run time for a scheduled job (float epoch s, the "schedule" score), "" for now.
-- ARGV[4]: the ordering key, "" for none.
-- ARGV[5]: the jid.
-- ARGV[6]: unique lock digest, "" for none.
-- ARGV[7]: unique window in milliseconds.
-- ARGV[8]: the tenant, "" for none: the job then goes to its tenant's list (fair queue).
-- Derived keys: a tenant's list "<ring key>|<tenant>" (lib/gate.lua).
--
-- A unique job whose lock is taken writes nothing and returns 0 (Sidekiq Enterprise's
-- unique jobs). A scheduled job goes to "schedule" and meets the gate when it is due
-- (enqueue_due.lua). A keyed job goes through the gate. Returns 1 when written.
-- #include gate
local payload = ARGV[2]
local k, unique = opt(ARGV[4]), opt(ARGV[6])
local klist, lock = job_keys(9, k, unique)
if lock then
  if not redis.call('SET', lock, ARGV[5], 'NX', 'PX', tonumber(ARGV[7])) then
    return 0
  end
end
if ARGV[3] ~= '' then
  redis.call('ZADD', KEYS[1], ARGV[3], payload)
  return 1
end
local G = gate_keys(2, ARGV[1])
if k then
  gate_dispatch(G, k, klist, ARGV[5], payload, opt(ARGV[8]))
else
  gate_out(G, payload, opt(ARGV[8]))
end
return 1
