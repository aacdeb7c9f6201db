-- TryAcquire, in one statement. Parameters: $1 key, $2 identity, $3 a fresh random grant id,
-- $4 session id, $5 TTL in microseconds.
--
-- A missing row is inserted. An existing row is taken only if it is the identity's own
-- (reentrancy, or a restarted controller resuming: the row moves to this session) or has expired
-- by the database's clock: its own expires_at and its session's renewed_at + ttl_us have both
-- passed (a missing session row counts as never renewed). The hold continues (same grant_id and
-- acquired_at) only if it is the identity's own and live.
--
-- ON CONFLICT DO UPDATE locks the row and evaluates the WHERE clause against its latest committed
-- version, so of many sessions racing for one free or expired key exactly one gets a row back.
-- The session row is read FOR SHARE: a renewal of that session in flight (which locks its row
-- FOR UPDATE) makes this statement wait and then see the new renewed_at, and a renewal that comes
-- second waits for this statement to commit; so a lock is never taken on the strength of a
-- session time that a concurrent renewal is replacing.
--
-- Shared places (places.go): the row is taken only while the key has no live place, and only if
-- it is still the version this statement's snapshot saw (same grant_id). The places subquery
-- reads that snapshot, which misses a place committed while this statement waited for the row
-- lock; but every shared acquire gives the row a new grant_id under that lock before it inserts a
-- place, so such a place shows as a changed row, and the statement takes nothing. A missing row
-- is inserted without these tests: a key with live places always has its row (a marker that no
-- release deletes). No row back means the key is held by another identity or in places, or
-- changed while this statement ran.
INSERT INTO lockwarden_locks AS l (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
VALUES ($1, $2, $3, $4, $5::bigint, now(), now() + $5::bigint * interval '1 microsecond')
ON CONFLICT (lock_key) DO UPDATE SET
    grant_id    = CASE WHEN l.expires_at <= now() AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = l.session_id FOR SHARE) + l.ttl_us * interval '1 microsecond' <= now(), true)
                  THEN EXCLUDED.grant_id ELSE l.grant_id END,
    acquired_at = CASE WHEN l.expires_at <= now() AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = l.session_id FOR SHARE) + l.ttl_us * interval '1 microsecond' <= now(), true)
                  THEN EXCLUDED.acquired_at ELSE l.acquired_at END,
    holder      = EXCLUDED.holder,
    session_id  = EXCLUDED.session_id,
    ttl_us      = EXCLUDED.ttl_us,
    expires_at  = EXCLUDED.expires_at
WHERE (l.holder = EXCLUDED.holder
       OR (l.expires_at <= now() AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = l.session_id FOR SHARE) + l.ttl_us * interval '1 microsecond' <= now(), true)))
  AND l.grant_id = (SELECT v.grant_id FROM lockwarden_locks v WHERE v.lock_key = l.lock_key)
  AND NOT EXISTS (SELECT 1 FROM lockwarden_locks_places p WHERE p.lock_key = l.lock_key
                  AND (p.expires_at > now() OR NOT COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = p.session_id FOR SHARE) + p.ttl_us * interval '1 microsecond' <= now(), true)))
RETURNING grant_id, acquired_at, expires_at
