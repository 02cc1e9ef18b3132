-- latch schema 12: the console's login sessions, so that they outlive a restart of latch serve
-- and every replica on the store sees them. The cookie's secret is never stored: hash is its
-- SHA-256 ("sha256:" + hex). name_key is the name as names are compared, so that the removal of
-- an account ends its sessions whatever their spelling. seen_at is the last request (written at
-- most once a minute), expires_at the end of the session's lifetime, however busy.

CREATE TABLE {schema}.console_sessions (
	hash       text   PRIMARY KEY,
	name       text   NOT NULL,
	name_key   text   NOT NULL,
	method     text   NOT NULL CHECK (method IN ('session', 'proxy')),
	created_at bigint NOT NULL,
	seen_at    bigint NOT NULL,
	expires_at bigint NOT NULL
);

CREATE INDEX console_sessions_name ON {schema}.console_sessions (name_key);
