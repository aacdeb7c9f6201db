-- TryAcquireShared, second statement of its transaction (places.go), which runs once the first
-- (places_mark_postgres.sql) has locked the key's row in the lock table: the two are sent in one
-- round trip, as one implicit transaction, and in READ COMMITTED each statement takes its own
-- snapshot, so this one sees every place that another shared acquire of the key committed before
-- the lock was granted. Parameters: $1 key, $2 identity, $3 a fresh random grant id, $4 session
-- id, $5 TTL in microseconds, $6 the number of places, $7 the grant id the first statement gave
-- the marker.
--
-- Nothing is taken unless the first statement made the row our marker (the row holds $7): else
-- the key is held exclusively. Places of other identities that have expired by the database's
-- clock are deleted (their session rows read FOR SHARE, so that a renewal of that session in
-- flight is waited for, as acquire_postgres.sql does). The identity's place is then inserted, or
-- refreshed if it has one, when it holds a live place already (whatever the limit is now) or
-- fewer than $6 other identities hold live places. A live place continues (same grant_id and
-- acquired_at); an expired one of the identity's is a new hold. No row back means the key is held
-- exclusively or every place is taken.
WITH pruned AS (
    DELETE FROM lockwarden_locks_places AS p
    WHERE p.lock_key = $1 AND p.holder <> $2
      AND p.expires_at <= now()
      AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = p.session_id FOR SHARE) + p.ttl_us * interval '1 microsecond' <= now(), true)
), others AS (
    SELECT count(*) AS n FROM lockwarden_locks_places AS p
    WHERE p.lock_key = $1 AND p.holder <> $2
      AND (p.expires_at > now() OR NOT COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = p.session_id FOR SHARE) + p.ttl_us * interval '1 microsecond' <= now(), true))
)
INSERT INTO lockwarden_locks_places AS p (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
SELECT $1, $2, $3, $4, $5::bigint, now(), now() + $5::bigint * interval '1 microsecond'
FROM others
WHERE EXISTS (SELECT 1 FROM lockwarden_locks AS m WHERE m.lock_key = $1 AND m.holder = '' AND m.grant_id = $7::bigint)
  AND (others.n < $6::bigint
       OR EXISTS (SELECT 1 FROM lockwarden_locks_places AS o WHERE o.lock_key = $1 AND o.holder = $2
                  AND (o.expires_at > now() OR NOT COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = o.session_id FOR SHARE) + o.ttl_us * interval '1 microsecond' <= now(), true))))
ON CONFLICT (lock_key, holder) DO UPDATE SET
    grant_id    = CASE WHEN p.expires_at <= now() AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = p.session_id FOR SHARE) + p.ttl_us * interval '1 microsecond' <= now(), true)
                  THEN EXCLUDED.grant_id ELSE p.grant_id END,
    acquired_at = CASE WHEN p.expires_at <= now() AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = p.session_id FOR SHARE) + p.ttl_us * interval '1 microsecond' <= now(), true)
                  THEN EXCLUDED.acquired_at ELSE p.acquired_at END,
    session_id  = EXCLUDED.session_id,
    ttl_us      = EXCLUDED.ttl_us,
    expires_at  = EXCLUDED.expires_at
RETURNING grant_id, acquired_at, expires_at
