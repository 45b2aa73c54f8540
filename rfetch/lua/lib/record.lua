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
--   after   the jid or bid it waits on (depend.lua, cancel_waiting.lua only)
--   prio    its priority, when not 0 (lib/priority.lua: read with prio_of)
-- record_of also derives, from the namespace prefix P (lib/keys.lua), the keys the fields
-- name: G (the gate of <q>, derived when first read), klist (the key's waiting list), lock
-- (the unique lock), C (the cap keys of <q>), bhash (the batch hash "b-<bid>"). A record
-- that is not a JSON object counts as {q = <default queue>}. record_of_job gives the same
-- record for a payload a script reads from Redis itself (a due job, a waiting job).

local RECORD_FIELDS = {'q', 'jid', 'key', 'unique', 'tenant', 'ck', 'limit', 'bid', 'ttl', 'class',
  'win', 'after', 'prio'}
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

-- The keys rec's fields name, derived under prefix P; rec returned as a record.
local function record_keys(rec, P, q)
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
  return record_keys(rec, P, q)
end

-- A payload's text field: a non-empty string, else nil (as Routing.of reads it).
local function record_text(v)
  if type(v) == 'string' and v ~= '' then return v end
  return nil
end

-- The record of a payload the script reads itself (job: the decoded JSON object; a due job
-- of enqueue_due.lua, a waiting job of cancel_waiting.lua), with the fields
-- rfetch/store/job_record.py's job_record(queue, Routing.of(payload)) gives it: a fetch
-- cap only with a concurrency key and a limit of at least 1, ttl only from a positive
-- number, the class only with ttl.
local function record_of_job(P, job)
  local rec = {jid = record_text(job['jid']), key = record_text(job['ordering_key']),
    unique = record_text(job['unique_key']), tenant = record_text(job['tenant']),
    bid = record_text(job['bid'])}
  local ck, limit = record_text(job['concurrency_key']), tonumber(job['concurrency_limit'])
  if ck and limit and limit >= 1 then rec.ck, rec.limit = ck, tostring(limit) end
  local ttl = job['store_result']
  if type(ttl) == 'number' and ttl > 0 then
    rec.ttl, rec.class = tostring(ttl), record_text(job['class'])
  end
  local p = prio_of_payload(job['priority'])
  if p then rec.prio = tostring(p) end
  return record_keys(rec, P, type(job['queue']) == 'string' and job['queue'] or nil)
end
