-- latch schema 13: the console's login sessions, so that they outlive a restart of latch serve
-- and every replica on the store sees them. The cookie's secret is never stored: hash is its
-- SHA-256 ("sha256:" + hex). name_key is the name as names are compared, so that the removal of
-- an account ends its sessions whatever their spelling. seen_at is the last request (written at
-- most once a minute), expires_at the end of the session's lifetime, however busy.

CREATE TABLE console_sessions (
	hash       TEXT    PRIMARY KEY,
	name       TEXT    NOT NULL,
	name_key   TEXT    NOT NULL,
	method     TEXT    NOT NULL CHECK (method IN ('session', 'proxy')),
	created_at INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) STRICT;

CREATE INDEX console_sessions_name ON console_sessions (name_key);
