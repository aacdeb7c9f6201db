-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- inspect.lua reports who holds a lock, exclusively or in places, without writing. It runs after
-- places.lua.
--
-- KEYS[1]  the lock key.
-- KEYS[2]  the hold record key of an exclusive hold.
-- KEYS[3]  the places key.
--
-- Returns {0} when the key is free, {1, holder, pttl, record} when it is held exclusively (record
-- is '' when there is none), or {2, identity, pttl, record, ...} listing its live places, the
-- first to expire first (record is the place record, or '').
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then
  return {0}
elseif kind == 'string' then
  return {1, redis.call('GET', key), redis.call('PTTL', key), redis.call('GET', KEYS[2]) or ''}
elseif kind ~= 'zset' then
  return wrongtype()
end
local places = live(key, servertime())
local out = {2}
for i = 1, #places, 2 do
  out[#out + 1] = places[i]
  out[#out + 1] = places[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[3], places[i]) or ''
end
return out
