-- The tables of lockwarden's SQL backend, PostgreSQL dialect: five statements, run in order.
-- The backend runs them once per session when a table is missing; a DBA may run them beforehand
-- instead (replacing lockwarden_locks with the LockBackend's spec.sql.table, also in the names of
-- the indexes, the sessions table and the places table), so that lockwarden needs no CREATE
-- privilege. Every statement is IF NOT EXISTS: on a database made by an earlier version, which
-- lacks the places table, they create it and leave the other tables as they are.
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
);
-- One row per shared place (backends.Sharer): a key held in places has a row here for each
-- holding identity, kept alive by its session as lock rows are, and its row in the lock table is
-- a marker (holder '', expired since 1970) that shared and exclusive acquires lock to take turns.
-- A place is held while GREATEST(expires_at, its session's renewed_at + ttl_us) is after now().
CREATE TABLE IF NOT EXISTS lockwarden_locks_places (
    lock_key    text        NOT NULL,             -- the DistributedLock's key
    holder      text        NOT NULL,             -- the identity that holds this place (pod UID)
    grant_id    bigint      NOT NULL,             -- random per hold: Lease.Version
    session_id  text        NOT NULL,             -- the controller session that keeps the place alive
    ttl_us      bigint      NOT NULL,             -- the TTL of the last acquire, in µs
    acquired_at timestamptz NOT NULL,             -- when the hold began, database clock
    expires_at  timestamptz NOT NULL,             -- the row's own expiry (last acquire + TTL), database clock
    PRIMARY KEY (lock_key, holder)
);
-- Renewal finds a session's expired places by session.
CREATE INDEX IF NOT EXISTS lockwarden_locks_psidx ON lockwarden_locks_places (session_id)
