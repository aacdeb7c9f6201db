-- TryAcquire, in one statement. Parameters: $1 key, $2 identity, $3 a fresh random grant id,
-- $4 session id, $5 TTL in microseconds.
--
-- A missing row is inserted. An existing row is taken only if it is the identity's own
-- (reentrancy, or a restarted controller resuming) or has expired by the database's clock; the
-- hold continues (same grant_id and acquired_at) only if it is the identity's own and live.
-- ON CONFLICT DO UPDATE locks the row and evaluates the WHERE clause against its latest committed
-- version, so of many sessions racing for one free or expired key exactly one gets a row back.
-- No row back means the key is held by another identity.
INSERT INTO lockwarden_locks AS l (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
VALUES ($1, $2, $3, $4, $5::bigint, now(), now() + $5::bigint * interval '1 microsecond')
ON CONFLICT (lock_key) DO UPDATE SET
    grant_id    = CASE WHEN l.expires_at <= now() THEN EXCLUDED.grant_id ELSE l.grant_id END,
    acquired_at = CASE WHEN l.expires_at <= now() THEN EXCLUDED.acquired_at ELSE l.acquired_at END,
    holder      = EXCLUDED.holder,
    session_id  = EXCLUDED.session_id,
    ttl_us      = EXCLUDED.ttl_us,
    expires_at  = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at <= now()
RETURNING grant_id, acquired_at, expires_at
