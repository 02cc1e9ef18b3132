-- latch schema 4: the API tokens of latch serve. Only the SHA-256 of a secret is kept.

CREATE TABLE {schema}.tokens (
	token_id       text   PRIMARY KEY,
	hash           text   NOT NULL UNIQUE,
	kind           text   NOT NULL CHECK (kind IN ('agent', 'approver')),
	agent          text   NOT NULL,
	principal_user text   NOT NULL,
	approver       text   NOT NULL,
	created_at     bigint NOT NULL,
	expires_at     bigint,
	revoked_at     bigint
);
