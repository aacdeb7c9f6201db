-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- release.lua frees a lock only if the identity still holds it: never another holder's key.
--
-- KEYS[1]  the lock key.
-- KEYS[2]  the hold record key.
-- ARGV[1]  the identity.
--
-- Returns {1} when the identity held the key and it was deleted, {0} when the key was free or
-- holds shared places (there is no exclusive hold to free; the places are left alone), or
-- {-1, holder} when another value holds it (nothing is deleted then).
if redis.call('TYPE', KEYS[1])['ok'] == 'zset' then
  return {0}
end
local holder = redis.call('GET', KEYS[1])
if not holder then
  return {0}
end
if holder ~= ARGV[1] then
  return {-1, holder}
end
redis.call('DEL', KEYS[1], KEYS[2])
return {1}
