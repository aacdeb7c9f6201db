-- The lock table of lockwarden's SQL backend, MySQL and MariaDB dialect. The backend runs this
-- once per session when the table is missing; a DBA may run it beforehand instead (replacing
-- lockwarden_locks with the LockBackend's spec.sql.table), so that lockwarden needs no CREATE
-- privilege. One row per lock key; a row whose expires_at has passed, by the database's clock
-- (UTC_TIMESTAMP, whatever the session time zone), is a free lock. Keys and holders are binary
-- strings: compared byte by byte, case and trailing spaces included.
CREATE TABLE IF NOT EXISTS lockwarden_locks (
    lock_key    VARBINARY(1024) NOT NULL,             -- the DistributedLock's key
    holder      VARBINARY(1024) NOT NULL,             -- the holder identity (pod UID)
    grant_id    BIGINT NOT NULL,                      -- random per hold: Lease.Version
    session_id  VARCHAR(64) CHARACTER SET ascii NOT NULL, -- the controller session that last wrote the row
    ttl_us      BIGINT NOT NULL,                      -- the TTL of the last acquire or renewal, in µs
    acquired_at DATETIME(6) NOT NULL,                 -- when the hold began, UTC, database clock
    expires_at  DATETIME(6) NOT NULL,                 -- when the hold ends unless renewed, UTC, database clock
    PRIMARY KEY (lock_key)
) ENGINE=InnoDB
