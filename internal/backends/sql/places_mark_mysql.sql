-- TryAcquireShared, first statement of its transaction (places.go): makes the key's row in the
-- lock table its places marker, and so locks it until the transaction ends. Parameters: key, a
-- fresh random grant id.
--
-- The marker is a row no identity holds (holder '', session '', expired since 1970): to the
-- exclusive statements it is a free lock, to be taken once the key has no live place; releases
-- never delete it. A missing row is inserted as the marker; a marker, or an exclusive hold that
-- has expired (judged as acquire_mysql.sql does), is rewritten as the marker with the new
-- grant_id. A live exclusive hold is left alone: the statement changes nothing (0 rows affected)
-- and the shared acquire is refused. The duplicate-key update locks the row exclusively in every
-- case, so shared and exclusive acquires of one key take turns on it.
--
-- MySQL and MariaDB evaluate these assignments from left to right: holder comes first, while the
-- expiry test still reads the old columns; the others read the holder just assigned, which is ''
-- exactly when the row became (or stayed) the marker.
INSERT INTO lockwarden_locks (lock_key, holder, grant_id, session_id, ttl_us, acquired_at, expires_at)
VALUES (?, '', ?, '', 0, UTC_TIMESTAMP(6), '1970-01-01 00:00:00')
ON DUPLICATE KEY UPDATE
    holder      = IF(holder = '' OR (expires_at <= UTC_TIMESTAMP(6) AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = lockwarden_locks.session_id) + INTERVAL ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)),
                     '', holder),
    grant_id    = IF(holder = '', VALUES(grant_id), grant_id),
    session_id  = IF(holder = '', '', session_id),
    ttl_us      = IF(holder = '', 0, ttl_us),
    acquired_at = IF(holder = '', VALUES(acquired_at), acquired_at),
    expires_at  = IF(holder = '', VALUES(expires_at), expires_at)
