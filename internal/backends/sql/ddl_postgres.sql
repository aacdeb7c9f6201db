-- The tables of lockwarden's SQL backend, PostgreSQL dialect: three statements, run in order.
-- The backend runs them once per session when a table is missing; a DBA may run them beforehand
-- instead (replacing lockwarden_locks with the LockBackend's spec.sql.table, also in the names of
-- the index and the sessions table), so that lockwarden needs no CREATE privilege.
--
-- One row per lock key. A lock is held while GREATEST(expires_at, the renewed_at of the session
-- that session_id names + ttl_us) is after the database's now(); a row past that is a free lock.
CREATE TABLE IF NOT EXISTS lockwarden_locks (
    lock_key    text        NOT NULL PRIMARY KEY, -- the DistributedLock's key
    holder      text        NOT NULL,             -- the holder identity (pod UID)
    grant_id    bigint      NOT NULL,             -- random per hold: Lease.Version
    session_id  text        NOT NULL,             -- the controller session that keeps the lock alive
    ttl_us      bigint      NOT NULL,             -- the TTL of the last acquire, in µs
    acquired_at timestamptz NOT NULL,             -- when the hold began, database clock
    expires_at  timestamptz NOT NULL              -- the row's own expiry (last acquire + TTL), database clock
);
-- Renewal finds a session's expired locks by session.
CREATE INDEX IF NOT EXISTS lockwarden_locks_sidx ON lockwarden_locks (session_id);
-- One row per controller session: renewing it renews every lock whose session_id names it.
CREATE TABLE IF NOT EXISTS lockwarden_locks_sessions (
    session_id  text        NOT NULL PRIMARY KEY, -- random per controller session
    renewed_at  timestamptz NOT NULL              -- the last renewal, database clock
)
