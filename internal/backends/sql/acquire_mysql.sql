-- TryAcquire, in one statement (the backend reads the row back with a second one). Parameters:
-- key, identity, a fresh random grant id, session id, TTL in microseconds, TTL in microseconds.
--
-- A missing row is inserted. An existing row is taken only if it is the identity's own
-- (reentrancy, or a restarted controller resuming) or has expired by the database's clock; the
-- hold continues (same grant_id and acquired_at) only if it is the identity's own and live.
-- Otherwise every column keeps its value and the statement changes nothing.
--
-- MySQL and MariaDB evaluate these assignments from left to right, each seeing the columns
-- already assigned. So the order matters: every condition reads the old holder and expires_at,
-- except the last, which reads the holder just assigned; that holder equals the identity exactly
-- when the row was taken. The duplicate-key update locks the row, so of many sessions racing for
-- one free or expired key exactly one takes it (InnoDB may abort a racer with a deadlock error
-- instead; the backend retries those).
INSERT INTO lockwarden_locks (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
    grant_id    = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(grant_id), grant_id),
    acquired_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(acquired_at), acquired_at),
    session_id  = IF(holder = VALUES(holder) OR expires_at <= UTC_TIMESTAMP(6), VALUES(session_id), session_id),
    ttl_us      = IF(holder = VALUES(holder) OR expires_at <= UTC_TIMESTAMP(6), VALUES(ttl_us), ttl_us),
    holder      = IF(holder = VALUES(holder) OR expires_at <= UTC_TIMESTAMP(6), VALUES(holder), holder),
    expires_at  = IF(holder = VALUES(holder), VALUES(expires_at), expires_at)
