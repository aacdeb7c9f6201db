-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- release_shared.lua frees an identity's place of a lock, and no other. It runs after places.lua.
--
-- KEYS[1]  the lock key.
-- KEYS[2]  the places key.
-- ARGV[1]  the identity.
--
-- Returns {1} when the identity held a live place and it was freed, {0} when it held none (the
-- key is free, its place expired, or the key is held exclusively, which is left alone).
local key, records, identity = KEYS[1], KEYS[2], ARGV[1]
if redis.call('TYPE', key)['ok'] ~= 'zset' then
  return {0}
end
prune(key, records, servertime())
local freed = redis.call('ZREM', key, identity)
redis.call('HDEL', records, identity)
settle(key, records)
return {freed}
