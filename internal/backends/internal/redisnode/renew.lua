-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- renew.lua extends many holds at once, each only if its identity still holds its key.
--
-- KEYS     pairs: the lock key and the hold record key of each hold, in order.
-- ARGV[1]  the TTL in milliseconds.
-- ARGV[i+1] the identity of hold i.
--
-- Returns one integer per hold: 1 when its identity held the key and both TTLs were reset, 0 when
-- the key is free or held by another value (nothing is written then: a lost lock is never
-- revived).
local ttl = ARGV[1]
local renewed = {}
for i = 1, #KEYS / 2 do
  local key, record = KEYS[2 * i - 1], KEYS[2 * i]
  -- pcall: a key of another type is simply not ours, and must not fail the whole batch.
  if redis.pcall('GET', key) == ARGV[i + 1] then
    redis.call('PEXPIRE', key, ttl)
    redis.call('PEXPIRE', record, ttl)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
