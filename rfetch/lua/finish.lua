-- finish.lua: acknowledge (or discard, or delete from a public queue) one job that has an
-- ordering key, a unique lock or a batch, releasing the key and lock and counting the batch's
-- outcome. Plain acknowledgements keep riding on fetch.lua. Called by
-- rfetch.store.commands.Commands.finish only.
--
-- KEYS[1]: the list holding the job: a private list "queue:sq|<identity>|<q>" (ack), or the
--          public queue "queue:<q>" (admin delete).
-- KEYS[2..8]: the seven gate keys of <q> (lib/gate.lua's G).
-- KEYS[9..]: the key's waiting list "rfetch:key:<q>:<k>" if ARGV[3] is not empty, then the
--          unique lock "rfetch:unique:<digest>" if ARGV[5] is not empty, then the six cap
--          keys of <q> (lib/cap.lua's C) if ARGV[6] is not empty.
-- ARGV[1]: the raw payload (exact bytes, what LREM matches).
-- ARGV[2]: the queue name <q> of the key gate.
-- ARGV[3]: ordering key, "" for none.
-- ARGV[4]: jid.
-- ARGV[5]: unique lock digest, "" for none.
-- ARGV[6]: concurrency key (fetch caps), "" for none (absent: none): its slot is given back.
-- ARGV[7] (a batched job only): "ok" (it succeeded) or "dead" (it failed for good and is
--          discarded); then, after the job's keys and the cap keys, KEYS[next]: its batch
--          hash "b-<bid>", KEYS[next + 1]: the namespace prefix P (lib/batch.lua).
--          ARGV[8]: for "dead", the failure's JSON.
-- Derived keys: a tenant's list "<ring key>|<tenant>" for the key's next job (lib/gate.lua);
--          a concurrency key's waiting list "<cap ring key>|<key>" (lib/cap.lua); the
--          batch's other keys, its parents' and a callback's queue (lib/batch.lua).
--
-- Only if this call removed the job (it was not pushed back meanwhile, which keeps it the
-- holder) is the key released (its next job goes out) and the unique lock dropped. Every key
-- the release may write is checked first (lib/guard.lua): one of another type changes
-- nothing and is an error reply, so the job stays in its list and the key's next job in the
-- key's list. The batch is counted in this same call, only if the job was removed.
-- Returns 1 if removed, 0 if the job was no longer in the list.
-- #include guard
-- #include gate
-- #include cap
-- #include workflow
-- #include batch
local k, unique = opt(ARGV[3]), opt(ARGV[5])
local klist, lock, ci = job_keys(9, k, unique)
local G = gate_keys(2, ARGV[2])
local C = nil
if opt(ARGV[6]) then C = cap_keys(ci, ARGV[2]) end
local bi = C and ci + 6 or ci  -- the batch's keys follow the cap keys
local bhash = opt(ARGV[7]) and KEYS[bi]
local w = wants_new()
want(w, KEYS[1], 'list')
if k then gate_release_wants(w, G, klist) end
if lock then unique_release_wants(w, lock) end
if C then cap_release_wants(w, C) end
local bad = misfit(w)
if bad then return redis.error_reply(bad) end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 0
end
if k then gate_release(G, k, klist, ARGV[4]) end
if lock then unique_release(lock, ARGV[4]) end
if C then cap_release(C, ARGV[6], ARGV[1]) end
if bhash then batch_event(KEYS[bi + 1], bhash, ARGV[4], ARGV[7], ARGV[8] or '') end
return 1
