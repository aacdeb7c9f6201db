-- Copyright 2026 The lockwarden Authors. Licensed under the Apache License, Version 2.0.

-- places.lua is prepended to every script that reads or writes shared places (see places.go):
-- the helpers below, and the layout they keep.
--
-- A lock key held in shared places is a sorted set: one member per holder identity, scored with
-- the place's expiry in milliseconds of the server's clock (TIME). Its companion hash, the places
-- key, maps each identity to its place record "<places>:<acquire ms>:<hold id>:<identity>", where
-- <places> is the limit the place was last taken under. Both keys expire (PEXPIREAT) with the
-- place that expires last, so that the lock key vanishes when no place is left and a plain
-- `SET key value NX` succeeds again.

-- Writing after TIME needs effects replication: the default since Redis 5, asked for on 3.2 and 4.
if redis.replicate_commands then
  redis.replicate_commands()
end

-- servertime is the server's clock in milliseconds, the clock that expires keys.
local function servertime()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- ms formats a number of milliseconds as an integer argument (never in exponent form).
local function ms(n)
  return string.format('%.0f', n)
end

-- prune drops the places of key that expired by now (score <= now), with their records.
local function prune(key, records, now)
  local gone = redis.call('ZRANGEBYSCORE', key, '-inf', ms(now))
  if #gone == 0 then
    return
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ms(now))
  for _, identity in ipairs(gone) do
    redis.call('HDEL', records, identity)
  end
end

-- settle makes key and its records expire with the place that expires last, or deletes both when
-- no place is left.
local function settle(key, records)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', key, records)
    return
  end
  redis.call('PEXPIREAT', key, last[2])
  redis.call('PEXPIREAT', records, last[2])
end

-- live lists the places of key in force at now, the first to expire first, as a flat list of
-- identity and remaining milliseconds.
local function live(key, now)
  local out = {}
  local places = redis.call('ZRANGEBYSCORE', key, '(' .. ms(now), '+inf', 'WITHSCORES')
  for i = 1, #places, 2 do
    out[#out + 1] = places[i]
    out[#out + 1] = tonumber(places[i + 1]) - now
  end
  return out
end

-- wrongtype is the error for a lock key that is neither a lock string nor a set of places.
local function wrongtype()
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end

---- end of places.lua
