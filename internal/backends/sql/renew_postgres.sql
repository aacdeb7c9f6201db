-- Renew's write, one statement whatever the number of locks: it renews the session, and with it
-- every lock and shared place whose session_id names it. Parameter: $1 session id.
--
-- The session row is locked first (FOR UPDATE), so that acquires, releases and renewals that
-- judge this session's locks and places wait for this statement (they read the session row FOR
-- SHARE). Then the session's locks and places that have already expired by the old renewed_at
-- are deleted: a lost lock or place is never revived by the new renewed_at. Deleting them is
-- what releasing them would do; a row another session took meanwhile names that session and is
-- left alone. Last, renewed_at is set to now(), never backwards. The rows written are the session
-- row and the expired locks and places, not the live ones.
WITH old AS (
    SELECT renewed_at FROM lockwarden_locks_sessions WHERE session_id = $1 FOR UPDATE
), expired AS (
    DELETE FROM lockwarden_locks AS l
    WHERE l.session_id = $1
      AND l.expires_at <= now()
      AND COALESCE((SELECT renewed_at FROM old) + l.ttl_us * interval '1 microsecond' <= now(), true)
    RETURNING 1
), expired_places AS (
    DELETE FROM lockwarden_locks_places AS p
    WHERE p.session_id = $1
      AND p.expires_at <= now()
      AND COALESCE((SELECT renewed_at FROM old) + p.ttl_us * interval '1 microsecond' <= now(), true)
    RETURNING 1
)
INSERT INTO lockwarden_locks_sessions AS s (session_id, renewed_at)
SELECT $1, now() FROM (SELECT count(*) FROM expired) AS deleted, (SELECT count(*) FROM expired_places) AS deleted_places
ON CONFLICT (session_id) DO UPDATE SET renewed_at = GREATEST(s.renewed_at, EXCLUDED.renewed_at)
