-- TryAcquireShared, second statement of its transaction (places.go), sent while the key's marker
-- row is locked (places_mark_mysql.sql): inserts the identity's place, or refreshes it if it has one, when it holds a
-- live place already (whatever the limit is now) or fewer than the given number of other
-- identities hold live places. Parameters: key, identity, a fresh random grant id, session id,
-- TTL in microseconds, TTL in microseconds, key, identity, the number of places, key, identity.
--
-- InnoDB reads the places of an INSERT ... SELECT as they are committed now, with shared locks,
-- and every other shared acquire of the key waits for the marker row: the count is exact. A live
-- place continues (same grant_id and acquired_at: the first two assignments read the old expiry
-- before it is assigned); an expired one of the identity's is a new hold. 0 rows affected means
-- every place is taken.
INSERT INTO lockwarden_locks_places (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
SELECT ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND FROM DUAL
WHERE (SELECT COUNT(*) FROM lockwarden_locks_places p LEFT JOIN lockwarden_locks_sessions s ON s.session_id = p.session_id
       WHERE p.lock_key = ? AND p.holder <> ?
         AND GREATEST(p.expires_at, COALESCE(s.renewed_at + INTERVAL p.ttl_us MICROSECOND, p.expires_at)) > UTC_TIMESTAMP(6)) < ?
   OR EXISTS (SELECT 1 FROM lockwarden_locks_places p LEFT JOIN lockwarden_locks_sessions s ON s.session_id = p.session_id
              WHERE p.lock_key = ? AND p.holder = ?
                AND GREATEST(p.expires_at, COALESCE(s.renewed_at + INTERVAL p.ttl_us MICROSECOND, p.expires_at)) > UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
    grant_id    = IF(expires_at <= UTC_TIMESTAMP(6) AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = lockwarden_locks_places.session_id) + INTERVAL ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE),
                     VALUES(grant_id), grant_id),
    acquired_at = IF(expires_at <= UTC_TIMESTAMP(6) AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = lockwarden_locks_places.session_id) + INTERVAL ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE),
                     VALUES(acquired_at), acquired_at),
    session_id  = VALUES(session_id),
    ttl_us      = VALUES(ttl_us),
    expires_at  = VALUES(expires_at)
