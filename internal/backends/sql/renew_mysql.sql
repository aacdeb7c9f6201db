-- Renew's write, one statement whatever the number of locks: it renews the session, and with it
-- every lock and shared place whose session_id names it. Parameters: session id, session id,
-- session id.
--
-- The session row is inserted, or renewed_at moved to now (never backwards), only if none of the
-- session's locks and places has already expired: a lost lock or place is never revived by the
-- new renewed_at. Otherwise the statement changes nothing (0 rows affected), and the backend
-- deletes the expired locks and places (renew_cleanup_mysql.sql) and sends this statement again.
-- InnoDB reads the rows of a data-changing statement with shared locks, and the duplicate-key
-- update locks the session row exclusively: acquires, releases and renewals that judge this
-- session's locks and places (which read the session row with a shared lock) wait for this
-- statement, or it for them. The only row written is the session row.
INSERT INTO lockwarden_locks_sessions (session_id, renewed_at)
SELECT ?, UTC_TIMESTAMP(6) FROM DUAL
WHERE NOT EXISTS (
    SELECT 1 FROM lockwarden_locks l
    LEFT JOIN lockwarden_locks_sessions s ON s.session_id = l.session_id
    WHERE l.session_id = ?
      AND l.expires_at <= UTC_TIMESTAMP(6)
      AND COALESCE(s.renewed_at + INTERVAL l.ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE))
  AND NOT EXISTS (
    SELECT 1 FROM lockwarden_locks_places p
    LEFT JOIN lockwarden_locks_sessions s ON s.session_id = p.session_id
    WHERE p.session_id = ?
      AND p.expires_at <= UTC_TIMESTAMP(6)
      AND COALESCE(s.renewed_at + INTERVAL p.ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE))
ON DUPLICATE KEY UPDATE renewed_at = GREATEST(renewed_at, VALUES(renewed_at))
