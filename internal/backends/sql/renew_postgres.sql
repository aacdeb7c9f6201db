-- Renew, in one statement whatever the number of leases: the leases come as three arrays.
-- Parameters: $1 TTL in microseconds, $2 session id, $3 keys, $4 identities, $5 grant ids (0
-- when the lease has no Version: any hold of the identity). Only rows that the identity still
-- holds, with the same grant, and that have not expired by the database's clock are extended:
-- a lost lock is never revived. The rows returned are the leases renewed.
UPDATE lockwarden_locks AS l SET
    expires_at = now() + $1::bigint * interval '1 microsecond',
    ttl_us     = $1::bigint,
    session_id = $2
FROM unnest($3::text[], $4::text[], $5::bigint[]) AS r(lock_key, holder, grant_id)
WHERE l.lock_key = r.lock_key
  AND l.holder = r.holder
  AND (r.grant_id = 0 OR l.grant_id = r.grant_id)
  AND l.expires_at > now()
RETURNING l.lock_key, l.holder, l.grant_id, l.ttl_us, l.acquired_at, l.expires_at, true
