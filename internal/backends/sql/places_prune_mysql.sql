-- TryAcquireShared, sent on its own before its transaction (places.go): deletes the key's places
-- of other identities that have expired by the database's clock, their session rows read with
-- shared locks (as every data-changing statement of InnoDB does), so that a renewal of that
-- session in flight is waited for. Deleting an expired place is what releasing it would do, and
-- needs no lock on the marker; it keeps the places table from growing with places whose
-- controller is gone. Parameters: key, identity.
DELETE FROM lockwarden_locks_places
WHERE lock_key = ? AND holder <> ?
  AND expires_at <= UTC_TIMESTAMP(6)
  AND COALESCE((SELECT s.renewed_at FROM lockwarden_locks_sessions s WHERE s.session_id = lockwarden_locks_places.session_id) + INTERVAL ttl_us MICROSECOND <= UTC_TIMESTAMP(6), TRUE)
