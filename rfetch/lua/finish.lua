-- finish.lua: acknowledge (or discard, or delete from a public queue) one job that has an
-- ordering key or a unique lock, releasing both (issue #5). Plain acknowledgements keep
-- riding on fetch.lua.
--
-- KEYS[1]: the list holding the job: a private list "queue:sq|<identity>|<q>" (ack), or the
--          public queue "queue:<q>" (admin delete).
-- ARGV[1]: the raw payload (exact bytes, what LREM matches).
-- ARGV[2]: namespace prefix P.
-- ARGV[3]: the queue name <q> of the key gate.
-- ARGV[4]: ordering key, "" for none.
-- ARGV[5]: jid.
-- ARGV[6]: unique lock digest, "" for none.
--
-- Only if this call removed the job (it was not pushed back meanwhile, which keeps it the
-- holder) is the key released (its next job goes out) and the unique lock dropped.
-- Returns 1 if removed, 0 if the job was no longer in the list.
-- #include gate
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then
  return 0
end
if ARGV[4] ~= '' then gate_release(ARGV[2], ARGV[3], ARGV[4], ARGV[5]) end
if ARGV[6] ~= '' then unique_release(ARGV[2], ARGV[6], ARGV[5]) end
return 1
