-- The lock table of lockwarden's SQL backend, PostgreSQL dialect. The backend runs this once per
-- session when the table is missing; a DBA may run it beforehand instead (replacing
-- lockwarden_locks with the LockBackend's spec.sql.table), so that lockwarden needs no CREATE
-- privilege. One row per lock key; a row whose expires_at has passed, by the database's clock,
-- is a free lock.
CREATE TABLE IF NOT EXISTS lockwarden_locks (
    lock_key    text        NOT NULL PRIMARY KEY, -- the DistributedLock's key
    holder      text        NOT NULL,             -- the holder identity (pod UID)
    grant_id    bigint      NOT NULL,             -- random per hold: Lease.Version
    session_id  text        NOT NULL,             -- the controller session that last wrote the row
    ttl_us      bigint      NOT NULL,             -- the TTL of the last acquire or renewal, in µs
    acquired_at timestamptz NOT NULL,             -- when the hold began, database clock
    expires_at  timestamptz NOT NULL              -- when the hold ends unless renewed, database clock
)
