-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- acquire_shared.lua takes one of a lock's places for a holder identity, or refreshes the
-- identity's place. It runs after places.lua.
--
-- KEYS[1]  the lock key: a sorted set of places, or a string while the lock is held exclusively.
-- KEYS[2]  the places key: the hash of place records.
-- ARGV[1]  the identity.
-- ARGV[2]  the TTL in milliseconds.
-- ARGV[3]  the hold record "<acquire ms>:<hold id>:<identity>" of a new place.
-- ARGV[4]  the number of places.
--
-- Returns {1, record} for a new place, {2, record} when the identity already held one (its expiry
-- is extended and its record kept, whatever the number of places now), {0, holder, pttl} when the
-- key is held exclusively, or {3, identity, pttl, ...} listing the live places, the first to
-- expire first, when every place is taken.
local key, records, identity = KEYS[1], KEYS[2], ARGV[1]
local ttl, places = tonumber(ARGV[2]), tonumber(ARGV[4])
local kind = redis.call('TYPE', key)['ok']
if kind == 'string' then
  return {0, redis.call('GET', key), redis.call('PTTL', key)}
elseif kind ~= 'zset' and kind ~= 'none' then
  return wrongtype()
end
local now = servertime()
if kind == 'none' then
  -- Records of places long gone (or of a key deleted by another client) describe nothing.
  redis.call('DEL', records)
else
  prune(key, records, now)
end

local code, record = 1, ARGV[3]
if redis.call('ZSCORE', key, identity) then
  code = 2
  local stored = redis.call('HGET', records, identity)
  local kept = stored and string.match(stored, '^%d+:(%d+:%x+:.*)$')
  if kept and string.match(kept, '^%d+:%x+:(.*)$') == identity then
    record = kept
  end
elseif redis.call('ZCARD', key) >= places then
  local full = live(key, now)
  table.insert(full, 1, 3)
  return full
end
redis.call('ZADD', key, ms(now + ttl), identity)
redis.call('HSET', records, identity, ARGV[4] .. ':' .. record)
settle(key, records)
return {code, record}
