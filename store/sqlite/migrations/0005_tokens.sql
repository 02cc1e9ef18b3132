-- latch schema 5: the API tokens of latch serve. Only the SHA-256 of a secret is kept.

CREATE TABLE tokens (
	token_id       TEXT    PRIMARY KEY,
	hash           TEXT    NOT NULL UNIQUE,
	kind           TEXT    NOT NULL CHECK (kind IN ('agent', 'approver')),
	agent          TEXT    NOT NULL,
	principal_user TEXT    NOT NULL,
	approver       TEXT    NOT NULL,
	created_at     INTEGER NOT NULL,
	expires_at     INTEGER,
	revoked_at     INTEGER
) STRICT;
