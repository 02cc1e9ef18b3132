-- latch schema 18: suspended executions (docs/agents.md#suspended-executions). One row per round:
-- the executor of an executing effect suspended, asking for input, and waits for one resume that
-- presents the token whose SHA-256 is token_sha256 (the token itself is never stored). A round
-- is spent once: resumed_at is set by a compare-and-set on its being 0.

CREATE TABLE suspensions (
	action_id        TEXT    NOT NULL,
	round            INTEGER NOT NULL CHECK (round >= 1),
	effect_key       TEXT    NOT NULL,
	attempt          INTEGER NOT NULL CHECK (attempt >= 1),
	token_sha256     TEXT    NOT NULL,
	arguments_sha256 TEXT    NOT NULL,
	agent            TEXT    NOT NULL,
	principal_user   TEXT    NOT NULL,
	request          TEXT    NOT NULL,
	suspended_at     INTEGER NOT NULL,
	lease_expires_at INTEGER NOT NULL,
	resumed_at       INTEGER NOT NULL DEFAULT 0,
	input_keys       TEXT    NOT NULL DEFAULT '[]',
	input_sha256     TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (action_id, round)
) STRICT;
