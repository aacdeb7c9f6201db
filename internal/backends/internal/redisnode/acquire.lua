-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- acquire.lua takes a lock for a holder identity, or refreshes the identity's hold on it.
--
-- KEYS[1]  the lock key. Its value is the holder identity: the standard `SET key value NX PX ttl`
--          form, so that other clients using that form on the same key are excluded too.
-- KEYS[2]  the hold record key: "<acquire time, unix ms>:<hold id>:<identity>".
-- ARGV[1]  the identity.
-- ARGV[2]  the TTL in milliseconds.
-- ARGV[3]  the hold record to write if this starts a new hold.
--
-- Returns {1, record} for a new hold, {2, record} when the identity already held the key (its TTL
-- is reset and its record kept), or {0, holder, pttl} when another value holds the key. While the
-- key holds shared places (a sorted set, see places.lua), SET NX fails as for any existing key,
-- and the holder reported is the place that expires first ('' and 0 if the last one is expiring
-- this very millisecond), whatever the identities: an exclusive hold never joins places.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  return {1, ARGV[3]}
end
if redis.call('TYPE', KEYS[1])['ok'] == 'zset' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first == 0 then
    return {0, '', 0}
  end
  return {0, first[1], tonumber(first[2]) - now}
end
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  return {0, holder, redis.call('PTTL', KEYS[1])}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local record = redis.call('GET', KEYS[2])
-- Keep the record only if it describes this identity's hold; the key may have been written by a
-- client that knows nothing of records.
if not record or string.match(record, '^%d+:%x+:(.*)$') ~= ARGV[1] then
  record = ARGV[3]
end
redis.call('SET', KEYS[2], record, 'PX', ARGV[2])
return {2, record}
