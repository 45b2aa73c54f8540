-- lib/keys.lua: the key names a script derives inside Lua, from the namespace prefix P
-- ("" or "<ns>:") it is given in KEYS. The formats are those of rfetch/store/keys.py;
-- tests/unit/test_lua_keys.py reads the table below and checks each format against Keys
-- for sample names, so the two registries cannot drift apart. Included with a
-- "-- #include keys" line, before every other library that names a key.
--
-- With a "{tag}" namespace every derived key is "{tag}:...", in the namespace's Redis
-- Cluster hash slot like the keys declared in KEYS (rfetch/store/cluster.py).
--
-- KEY_FORMATS: name -> format; "%s" stands for the arguments, in order (a queue name, an
-- ordering key, a digest, a jid, a bid).
local KEY_FORMATS = {
  queue = 'queue:%s',
  queues = 'queues',
  dead = 'dead',
  key_holders = 'rfetch:key-holders:%s',
  key_leases = 'rfetch:key-leases:%s',
  key_list = 'rfetch:key:%s:%s',
  fair_ring = 'rfetch:fair:%s',
  fair_wake = 'rfetch:fair-wake:%s',
  fair_queues = 'rfetch:fair-queues',
  cap_ring = 'rfetch:cap:%s',
  cap_held = 'rfetch:cap-held:%s',
  cap_slots = 'rfetch:cap-slots:%s',
  cap_limits = 'rfetch:cap-limits:%s',
  cap_queues = 'rfetch:cap-queues',
  prio = 'rfetch:prio:%s',
  prio_queues = 'rfetch:prio-queues',
  unique = 'rfetch:unique:%s',
  batch = 'b-%s',
  batch_counter = 'rfetch:batches-%s',
  result = 'rfetch:result:%s',
  result_wake = 'rfetch:result-wake:%s',
  dependents = 'rfetch:dependents:%s',
  waiting = 'rfetch:waiting',
  deps_cancelled = 'rfetch:deps-cancelled',
  results_stored = 'rfetch:results-stored',
}

-- The key name under prefix P: KEY_FORMATS[name] with its "%s" filled by the arguments.
local function key_of(P, name, a, b)
  return P .. string.format(KEY_FORMATS[name], a, b)
end
