-- The tables of lockwarden's SQL backend, MySQL and MariaDB dialect: three statements, run in
-- order. The backend runs them once per session when a table is missing; a DBA may run them
-- beforehand instead (replacing lockwarden_locks with the LockBackend's spec.sql.table, also in the
-- names of the sessions and places tables), so that lockwarden needs no CREATE privilege. Every
-- statement is IF NOT EXISTS: on a database made by an earlier version, which lacks the places
-- table, they create it and leave the other tables as they are. Times are UTC by the
-- database's clock (UTC_TIMESTAMP, whatever the session time zone). Keys and holders are binary
-- strings: compared byte by byte, case and trailing spaces included.
--
-- One row per lock key. A lock is held while GREATEST(expires_at, the renewed_at of the session
-- that session_id names + ttl_us) is after UTC_TIMESTAMP(6); a row past that is a free lock.
CREATE TABLE IF NOT EXISTS lockwarden_locks (
    lock_key    VARBINARY(1024) NOT NULL,             -- the DistributedLock's key
    holder      VARBINARY(1024) NOT NULL,             -- the holder identity (pod UID)
    grant_id    BIGINT NOT NULL,                      -- random per hold: Lease.Version
    session_id  VARCHAR(64) CHARACTER SET ascii NOT NULL, -- the controller session that keeps the lock alive
    ttl_us      BIGINT NOT NULL,                      -- the TTL of the last acquire, in µs
    acquired_at DATETIME(6) NOT NULL,                 -- when the hold began
    expires_at  DATETIME(6) NOT NULL,                 -- the row's own expiry (last acquire + TTL)
    PRIMARY KEY (lock_key),
    KEY lockwarden_locks_sidx (session_id)            -- renewal finds a session's expired locks by session
) ENGINE=InnoDB;
-- One row per controller session: renewing it renews every lock whose session_id names it.
CREATE TABLE IF NOT EXISTS lockwarden_locks_sessions (
    session_id  VARCHAR(64) CHARACTER SET ascii NOT NULL, -- random per controller session
    renewed_at  DATETIME(6) NOT NULL,                 -- the last renewal
    PRIMARY KEY (session_id)
) ENGINE=InnoDB;
-- One row per shared place (backends.Sharer): a key held in places has a row here for each
-- holding identity, kept alive by its session as lock rows are, and its row in the lock table is
-- a marker (holder '', expired since 1970) that shared and exclusive acquires lock to take turns.
-- The primary key is at most 2 x 1026 bytes, within InnoDB's 3072.
CREATE TABLE IF NOT EXISTS lockwarden_locks_places (
    lock_key    VARBINARY(1024) NOT NULL,             -- the DistributedLock's key
    holder      VARBINARY(1024) NOT NULL,             -- the identity that holds this place (pod UID)
    grant_id    BIGINT NOT NULL,                      -- random per hold: Lease.Version
    session_id  VARCHAR(64) CHARACTER SET ascii NOT NULL, -- the controller session that keeps the place alive
    ttl_us      BIGINT NOT NULL,                      -- the TTL of the last acquire, in µs
    acquired_at DATETIME(6) NOT NULL,                 -- when the hold began
    expires_at  DATETIME(6) NOT NULL,                 -- the row's own expiry (last acquire + TTL)
    PRIMARY KEY (lock_key, holder),
    KEY lockwarden_locks_psidx (session_id)           -- renewal finds a session's expired places by session
) ENGINE=InnoDB
