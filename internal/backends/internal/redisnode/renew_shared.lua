-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- renew_shared.lua extends many places at once, each only if its identity still holds a live
-- place of its key. It runs after places.lua.
--
-- KEYS     pairs: the lock key and the places key of each place, in order.
-- ARGV[1]  the TTL in milliseconds.
-- ARGV[i+1] the identity of place i.
--
-- Returns one integer per place: the number of places it was taken under (at least 1) when it
-- was live and is extended, -1 when it is live and extended but its record is missing, 0 when
-- it is free or expired (nothing is written for it then: a lost place is never revived).
local ttl = tonumber(ARGV[1])
local now = servertime()
local pruned = {}
local renewed = {}
for i = 1, #KEYS / 2 do
  local key, records, identity = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  renewed[i] = 0
  -- A key held exclusively, or of another type, holds no place.
  if redis.call('TYPE', key)['ok'] == 'zset' then
    if not pruned[key] then
      prune(key, records, now)
      pruned[key] = true
    end
    if redis.call('ZSCORE', key, identity) then
      redis.call('ZADD', key, ms(now + ttl), identity)
      local stored = redis.call('HGET', records, identity)
      renewed[i] = tonumber(stored and string.match(stored, '^(%d+):') or '') or -1
      settle(key, records)
    end
  end
end
return renewed
