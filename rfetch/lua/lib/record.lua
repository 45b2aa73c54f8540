-- #include keys
-- #include gate
-- #include cap
-- lib/record.lua: one job's record, the per-job fields an ending script needs, sent as ONE
-- compact JSON text (rfetch/store/job_record.py writes it) and decoded here once. Included
-- with a "-- #include record" line. A new per-job option that Lua must see is a field of
-- the record, read by the one library that acts on it (lib/outcome.lua), not an argument
-- slot of every script.
--
-- Fields (absent when the job has none; an empty string counts as absent):
--   q       the queue name <q> (always)
--   jid     the job id
--   key     its ordering key (lib/gate.lua)
--   unique  its unique lock's digest
--   tenant  its tenant (fair tenants)
--   ck      its concurrency key (fetch caps, lib/cap.lua), for a capped job only
--   limit   its concurrency limit (with ck)
--   bid     its batch (lib/batch.lua)
--   ttl     seconds to keep its recorded outcome (store_result, lib/workflow.lua)
--   class   its class name (the recorded outcome's "class")
--   win     its unique lock's window in milliseconds (push.lua only)
-- record_of also derives, from the namespace prefix P (lib/keys.lua), the keys the fields
-- name: G (the gate of <q>, derived when first read), klist (the key's waiting list), lock (the unique lock), C (the
-- cap keys of <q>), bhash (the batch hash "b-<bid>"). A record that is not a JSON object
-- counts as {q = <default queue>}.

local RECORD_FIELDS = {'q', 'jid', 'key', 'unique', 'tenant', 'ck', 'limit', 'bid', 'ttl', 'class',
  'win'}
-- RECORD_FIELDS as a set, built at the first record (a Functions library runs no call at
-- its load: rfetch.store.functions).
local RECORD_FIELD = nil

-- G, the gate keys of the record's queue, derived at the first read of rec.G: most
-- records (a batched or capped job's acknowledgement) never need them.
local RECORD_LAZY = {__index = function(rec, name)
  if name ~= 'G' then return nil end
  local G = gate_keys_of(rec.P, rec.q)
  rawset(rec, 'G', G)
  return G
end}

-- C of each queue, derived once a call (one prefix P a call); a call is known by its KEYS
-- table, new at each call (a Functions library keeps its locals: rfetch.store.functions).
local record_caps, record_run = {}, nil

-- The record of text ("" for a job with no fields beyond its queue q) under prefix P.
local function record_of(P, text, q)
  local rec = {}
  if not RECORD_FIELD then
    RECORD_FIELD = {}
    for _, f in ipairs(RECORD_FIELDS) do RECORD_FIELD[f] = true end
  end
  if text and text ~= '' then
    local ok, raw = pcall(cjson.decode, text)
    if ok and type(raw) == 'table' then
      for f, v in pairs(raw) do  -- the record's own fields only (RECORD_FIELDS), as text
        if type(v) == 'number' then v = tostring(v) end
        if RECORD_FIELD[f] and type(v) == 'string' and v ~= '' then rec[f] = v end
      end
    end
  end
  rec.q = rec.q or q or ''
  rec.P = P
  if rec.key then rec.klist = key_of(P, 'key_list', rec.q, rec.key) end
  if rec.unique then rec.lock = key_of(P, 'unique', rec.unique) end
  if rec.ck then
    if record_run ~= KEYS then record_caps, record_run = {}, KEYS end
    rec.C = record_caps[rec.q] or cap_keys_of(P, rec.q)
    record_caps[rec.q] = rec.C
  end
  if rec.bid then rec.bhash = key_of(P, 'batch', rec.bid) end
  return setmetatable(rec, RECORD_LAZY)
end
