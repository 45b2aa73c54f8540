-- api_find.lua: look for jobs by jid in one window of a queue or sorted set, on the server,
-- so that rfetch.api (explain, actions by jid) never loads a whole big list or set.
--
-- KEYS[1]: a list ("queue:<q>" or a private list "queue:sq|<identity>|<q>") or a sorted set
--          ("schedule", "retry", "dead").
-- ARGV[1]: "list" or "zset".
-- ARGV[2]: position of the window's first entry: for a list, counted from the right end (the
--          job that runs next is 0); for a sorted set, the rank (lowest score is 0).
-- ARGV[3]: entries in the window (the caller keeps it to a few thousand, so Redis is never
--          blocked for long).
-- ARGV[4..]: the jids looked for.
--
-- Every top-level-looking '"jid":"..."' of an entry is compared (a jid inside args may
-- match too: the caller parses the entry and checks its real jid). Returns
-- {examined, position_1, entry_1, score_1, position_2, ...}; score is "" for lists.
local wanted = {}
for i = 4, #ARGV do
  wanted[ARGV[i]] = true
end
local start = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local out = {0}

local function matches(entry)
  for jid in string.gmatch(entry, '"jid"%s*:%s*"([^"]*)"') do
    if wanted[jid] then
      return true
    end
  end
  return false
end

if ARGV[1] == 'list' then
  local items = redis.call('LRANGE', KEYS[1], -(start + count), -(start + 1))
  local n = #items
  for i = n, 1, -1 do
    if matches(items[i]) then
      out[#out + 1] = start + (n - i)
      out[#out + 1] = items[i]
      out[#out + 1] = ''
    end
  end
  out[1] = n
else
  local items = redis.call('ZRANGE', KEYS[1], start, start + count - 1, 'WITHSCORES')
  for i = 1, #items, 2 do
    if matches(items[i]) then
      out[#out + 1] = start + (i - 1) / 2
      out[#out + 1] = items[i]
      out[#out + 1] = items[i + 1]
    end
  end
  out[1] = #items / 2
end
return out
