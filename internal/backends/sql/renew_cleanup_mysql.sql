-- Deletes a session's locks, then its shared places, that have expired, before its renewal
-- (renew_mysql.sql) can go on: two statements, each with the parameter session id. Deleting an
-- expired lock or place is what releasing it would do; a row another session took meanwhile names
-- that session and is left alone.
DELETE l FROM lockwarden_locks l
LEFT JOIN lockwarden_locks_sessions s ON s.session_id = l.session_id
WHERE l.session_id = ?
  AND l.expires_at <= UTC_TIMESTAMP(6)
  AND COALESCE(s.renewed_at + INTERVAL l.ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE);
DELETE p FROM lockwarden_locks_places p
LEFT JOIN lockwarden_locks_sessions s ON s.session_id = p.session_id
WHERE p.session_id = ?
  AND p.expires_at <= UTC_TIMESTAMP(6)
  AND COALESCE(s.renewed_at + INTERVAL p.ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)
