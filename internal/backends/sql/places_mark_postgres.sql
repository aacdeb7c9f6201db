-- TryAcquireShared, first statement of its transaction (places.go): makes the key's row in the
-- lock table its places marker, and so locks it until the transaction ends. Parameters: $1 key,
-- $2 a fresh random grant id. places_acquire_postgres.sql follows in the same round trip.
--
-- The marker is a row no identity holds (holder '', session '', expired since 1970): to the
-- exclusive statements it is a free lock, to be taken once the key has no live place; releases
-- never delete it. A missing row is inserted as the marker; a marker, or an exclusive hold that
-- has expired (judged as acquire_postgres.sql does, reading its session row FOR SHARE), is
-- rewritten as the marker with the new grant_id, which tells an exclusive acquire that waited for
-- this row that places may have changed. A live exclusive hold is left alone, and no row comes
-- back: the shared acquire is refused (the second statement takes nothing). ON CONFLICT locks the row in every case, so shared and
-- exclusive acquires of one key take turns on it.
INSERT INTO lockwarden_locks AS l (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
VALUES ($1, '', $2, '', 0, now(), 'epoch')
ON CONFLICT (lock_key) DO UPDATE SET
    holder      = EXCLUDED.holder,
    grant_id    = EXCLUDED.grant_id,
    session_id  = EXCLUDED.session_id,
    ttl_us      = EXCLUDED.ttl_us,
    acquired_at = EXCLUDED.acquired_at,
    expires_at  = EXCLUDED.expires_at
WHERE l.holder = ''
   OR (l.expires_at <= now() AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = l.session_id FOR SHARE) + l.ttl_us * interval '1 microsecond' <= now(), true))
RETURNING true
