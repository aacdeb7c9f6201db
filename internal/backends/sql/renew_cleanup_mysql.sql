-- Deletes a session's locks that have expired, before its renewal (renew_mysql.sql) can go on.
-- Parameter: session id. Deleting an expired lock is what releasing it would do; a row another
-- session took meanwhile names that session and is left alone.
DELETE l FROM lockwarden_locks l
LEFT JOIN lockwarden_locks_sessions s ON s.session_id = l.session_id
WHERE l.session_id = ?
  AND l.expires_at <= UTC_TIMESTAMP(6)
  AND COALESCE(s.renewed_at + INTERVAL l.ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)
