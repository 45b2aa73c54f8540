-- lib/guard.lua: a script checks every key it may write, and every number it will use,
-- before its first write. Redis does not roll back a script that fails half-way (an error
-- after a write leaves the earlier writes in place): a script that removed a job from one
-- list and then failed to add it to a key of the wrong type would lose it. So each script
-- that moves a job first lists the keys it may write with the type each must have (wants),
-- then checks them (misfit) and, on a misfit, changes nothing. Included with a
-- "-- #include guard" line, before "-- #include gate" (rfetch.store.scripts).
--
-- Out of memory (maxmemory) and READONLY (a replica after failover) need no check: Redis
-- refuses them at a script's first write, never after it.

-- Note that key must be absent or of type kind ("list", "set", "zset", "hash", "string").
-- w is a table {keys = {...}, kinds = {...}, seen = {...}} from wants_new().
local function wants_new() return {keys = {}, kinds = {}, seen = {}} end

local function want(w, key, kind)
  if key == nil or w.seen[key] then return end
  w.seen[key] = true
  w.keys[#w.keys + 1] = key
  w.kinds[#w.kinds + 1] = kind
end

-- nil if every key of w is absent or of its kind, else a WRONGTYPE message naming the first
-- that is not (the caller writes nothing).
local function misfit(w)
  for i, key in ipairs(w.keys) do
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'none' and t ~= w.kinds[i] then
      return 'WRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. w.kinds[i] ..
        ': nothing was changed'
    end
  end
  return nil
end

-- The number in text v (a Redis score or count), or nil when v is not a finite number.
local function finite(v)
  local n = tonumber(v)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end
