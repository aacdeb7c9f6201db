-- TryAcquire, in one statement (the backend reads the row back with a second one). Parameters:
-- key, identity, a fresh random grant id, session id, TTL in microseconds, TTL in microseconds.
--
-- A missing row is inserted. An existing row is taken only if it is the identity's own
-- (reentrancy, or a restarted controller resuming: the row moves to this session) or has expired
-- by the database's clock: its own expires_at and its session's renewed_at + ttl_us have both
-- passed (a missing session row counts as never renewed). The hold continues (same grant_id and
-- acquired_at) only if it is the identity's own and live. Otherwise every column keeps its value
-- and the statement changes nothing.
--
-- MySQL and MariaDB evaluate these assignments from left to right, each seeing the columns
-- already assigned. So the order matters: the expiry test reads the old expires_at, session_id
-- and ttl_us, so it comes before they are assigned; the last three read the holder just
-- assigned, which equals the identity exactly when the row was taken. The duplicate-key update
-- locks the row, so of many sessions racing for one free or expired key exactly one takes it
-- (InnoDB may abort a racer with a deadlock error instead; the backend retries those). InnoDB
-- reads the session row in a data-changing statement with a shared lock: a renewal of that
-- session in flight (which holds it exclusively) makes this statement wait and then read the
-- new renewed_at, and a renewal that comes second waits for this statement to commit.
--
-- Shared places (places.go): the row is taken only while the key has no live place. A shared
-- acquire locks this row before it inserts a place, so the duplicate-key update waits for it to
-- commit; and InnoDB reads the places and their sessions in a data-changing statement as they
-- are committed now, with shared locks, so the place is seen. A missing row is inserted without
-- the test: a key with live places always has its row (a marker that no release deletes).
INSERT INTO lockwarden_locks (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
    grant_id    = IF(expires_at <= UTC_TIMESTAMP(6) AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = lockwarden_locks.session_id) + INTERVAL ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)
                     AND NOT EXISTS (SELECT 1 FROM lockwarden_locks_places p LEFT JOIN lockwarden_locks_sessions s ON s.session_id = p.session_id
                     WHERE p.lock_key = lockwarden_locks.lock_key AND GREATEST(p.expires_at, COALESCE(s.renewed_at + INTERVAL p.ttl_us MICROSECOND, p.expires_at)) > UTC_TIMESTAMP(6)),
                     VALUES(grant_id), grant_id),
    acquired_at = IF(expires_at <= UTC_TIMESTAMP(6) AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = lockwarden_locks.session_id) + INTERVAL ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)
                     AND NOT EXISTS (SELECT 1 FROM lockwarden_locks_places p LEFT JOIN lockwarden_locks_sessions s ON s.session_id = p.session_id
                     WHERE p.lock_key = lockwarden_locks.lock_key AND GREATEST(p.expires_at, COALESCE(s.renewed_at + INTERVAL p.ttl_us MICROSECOND, p.expires_at)) > UTC_TIMESTAMP(6)),
                     VALUES(acquired_at), acquired_at),
    holder      = IF((holder = VALUES(holder) OR (expires_at <= UTC_TIMESTAMP(6) AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = lockwarden_locks.session_id) + INTERVAL ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)))
                     AND NOT EXISTS (SELECT 1 FROM lockwarden_locks_places p LEFT JOIN lockwarden_locks_sessions s ON s.session_id = p.session_id
                     WHERE p.lock_key = lockwarden_locks.lock_key AND GREATEST(p.expires_at, COALESCE(s.renewed_at + INTERVAL p.ttl_us MICROSECOND, p.expires_at)) > UTC_TIMESTAMP(6)),
                     VALUES(holder), holder),
    session_id  = IF(holder = VALUES(holder), VALUES(session_id), session_id),
    ttl_us      = IF(holder = VALUES(holder), VALUES(ttl_us), ttl_us),
    expires_at  = IF(holder = VALUES(holder), VALUES(expires_at), expires_at)
